package holdfast

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Target is one part of a LockAll: a lock name on a Client.
type Target struct {
	Client *Client
	Name   string
}

// LockAll asks for every target at once and returns at once, as Lock does;
// Acquired closes when all of them are held, never for a part of them.
//
// Each part is an ordinary reentrant hold of its name (so a LockAll and a
// Lock on the same name exclude each other, and WithOwner nests them), with
// the options' lease or watchdog. The parts are taken in one global order
// (by name, then ClientID), whatever the order of targets, so LockAll calls
// over overlapping names never deadlock: the first round tries every part at
// once; when some part is held elsewhere, the parts after it in the global
// order are given back and the coordinator waits for that part, then goes on
// with the rest the same way.
//
// All or nothing: if the composite is not granted within WithWait (or ctx
// ends, or a part fails), every part it took is released before Lost closes.
// A refusal that ends it (with WithWait(0), any refusal) ends it at once,
// without waiting for the other parts' answers: a grant still on its way
// then is given back by its Client in the background. Once held, Lost closes when
// any part is lost (Err names the part, its Client and its node's address,
// and wraps its cause) or after Release, which releases every part. Deadline
// is the earliest of the parts' deadlines; Token is the first target's token
// and Tokens gives each target's, in the order given.
//
// Release, and every other end, waits for the parts' nodes that can be
// reached, and at most the Clients' CallTimeout: never for a lease. It
// returns nil when every part whose node answered is released; a part whose
// node is down or silent can only let its key run out (its renewal has
// stopped), and its Client repeats its release in the background until
// Redis answers, the lease ends or the Client closes. "Released before Lost
// closes" holds for every node that answers.
//
// Two targets with equal names on different Clients are ordered by ClientID,
// which differs between processes: give parts on different deployments
// different names if several processes lock them together.
func LockAll(ctx context.Context, targets []Target, opts ...Option) *Lock {
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Name
	}
	var order []int
	if ctx != nil && validTargets(targets) {
		order = globalOrder(targets)
	}
	ordered := make([]Target, len(order))
	for i, j := range order {
		ordered[i] = targets[j]
	}
	if order == nil {
		ordered = targets
	}
	p := &lockAll{order: order}
	c, l := newComposite(ctx, "LockAll", strings.Join(names, ","), ordered, opts, p)
	if c != nil {
		c.run(ctx)
	}
	return l
}

// validTargets reports whether globalOrder can sort targets; the composite's
// check reports what is wrong otherwise.
func validTargets(targets []Target) bool {
	for _, t := range targets {
		if t.Client == nil {
			return false
		}
	}
	return len(targets) > 0
}

// lockAll is LockAll's policy. Parts before cursor are held; round is the
// current round's attempts, for parts cursor, cursor+1, ….
type lockAll struct {
	order   []int // part (global order) -> index in the caller's targets
	cursor  int
	waiting bool // the round waits for part cursor alone
	round   []*attempt
}

func (p *lockAll) start(c *composite) {
	c.armBudget()
	p.fastRound(c)
}

// fastRound tries every part from cursor on at once, each once.
func (p *lockAll) fastRound(c *composite) {
	p.waiting, p.round = false, p.round[:0]
	for i := p.cursor; i < len(c.targets); i++ {
		p.round = append(p.round, c.enqueue(i, 0))
	}
}

// waitRound waits for part cursor, holding only the parts before it.
func (p *lockAll) waitRound(c *composite) {
	p.waiting = true
	p.round = append(p.round[:0], c.enqueue(p.cursor, c.remaining()))
}

func (p *lockAll) granted(c *composite, _ *attempt) { p.check(c) }

func (p *lockAll) ended(c *composite, a *attempt) {
	if a.part < p.cursor {
		// A part taken in an earlier round was lost while a later one is
		// waited for: the composite cannot be granted whole any more.
		c.fail(c.partErr(a, fmt.Errorf("lost while waiting for the other parts: %w", a.err)))
		return
	}
	p.check(c)
}

// check decides once every attempt of the round has an answer, or at the
// first refusal that ends the LockAll: the other parts' answers cannot
// change that, and a silent node's may take a whole CallTimeout.
func (p *lockAll) check(c *composite) {
	for _, a := range p.round {
		if a.over && (!errors.Is(a.err, ErrWaitTimeout) || p.waiting || c.budgetSpent()) {
			c.fail(c.partErr(a, a.err))
			return
		}
	}
	granted := make([]bool, len(p.round))
	for i, a := range p.round {
		if !a.held && !a.over {
			return
		}
		granted[i] = a.held && !a.over
	}
	j := firstRefused(granted)
	if j < 0 {
		p.cursor += len(p.round)
		if p.cursor < len(c.targets) {
			p.fastRound(c)
			return
		}
		c.acquire(p.tokens(c))
		return
	}
	// Part j was busy and the budget lasts: wait for it alone.
	for _, a := range p.round[j+1:] {
		c.giveBack(a)
	}
	p.cursor += j
	p.waitRound(c)
}

// tokens returns the first target's token and every target's, in the
// caller's order.
func (p *lockAll) tokens(c *composite) (uint64, []uint64) {
	tokens := make([]uint64, len(c.targets))
	for part, a := range c.cur {
		tokens[p.order[part]] = a.token
	}
	return tokens[0], tokens
}

func (p *lockAll) heldLost(c *composite, a *attempt) {
	c.fail(c.partErr(a, fmt.Errorf("lost: %w", a.err)))
}

// joined cannot happen: every part is held before the composite is.
func (p *lockAll) joined(*composite, *attempt) {}

func (p *lockAll) deadline(c *composite) time.Time { return earliest(deadlines(c.held())) }

// unconfirmed: every part not confirmed is told, as a LockAll of those names
// waits for its key to run out meanwhile.
func (p *lockAll) unconfirmed(_ *composite, errs []error) []error { return errs }

// released: never before every part's node answered (or the call timeout
// passed): a LockAll's names are all free, or its Release says which are not.
func (p *lockAll) released(*composite) bool { return false }
