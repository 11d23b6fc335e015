package holdfast

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/holdfast/holdfast/lockactor"
)

// A composite is the coordinator behind LockAll and RedLock. It runs ordinary
// reentrant Lock requests ("attempts", one or more per part over its life) on
// the parts' Clients and drives the same *Lock handle a plain Lock returns:
// Lock.Release and the context watcher reach it through compositeRef, the
// parts' actors through attemptHandle.
//
// # Concurrency
//
// The composite starts no goroutine of its own (except the RedLock fence
// call on a production Client, see raiseFence). Its state is guarded by mu
// and changed only by the callbacks of its attempts' actors, by Release, by
// the context watcher and by its two timers (the wait budget; the end's
// bound). Calls into actors (Enqueue, Send) never run under mu: they are
// queued in out and run by do after mu is released, so an engine that calls
// back at once cannot deadlock on mu.
//
// # Ending
//
// The Lock's Lost is closed by the composite once every hold it took has
// been given back and answered for, and not later than the nodes' call
// timeout: a node that is down or silent cannot hold up a Release or a
// failed round for a lease. An attempt the composite never saw granted is
// cancelled and not waited for; one whose release call failed (an interim
// ErrReleaseUnconfirmed answer) or did not answer within the bound can only
// let its key run out (its renewal has stopped). What is left of either is
// settled in the background by the attempt's actor, which belongs to its
// Client (repeated until Redis answers, the lease runs out or the Client
// closes): no goroutine of the composite's outlives it.
type composite struct {
	l       *Lock
	what    string   // "LockAll" or "RedLock": errors name it
	name    string   // the Lock's name (its Name, through compositeRef)
	targets []Target // the parts, in the order the coordinator takes them
	o       lockOptions
	owner   string // the caller's WithOwner, or "" for a fresh owner per attempt
	clock   clock.Clock
	waitEnd time.Time // end of the wait budget, for o.wait > 0
	pol     policy

	mu          sync.Mutex // guards the fields below
	state       compState
	cur         []*attempt // the live attempt of each part, nil when none
	live        int        // attempts the end waits for (see letGo)
	cause       error      // why the composite ends, once ending
	userRelease bool       // Release started the end: answer it
	relErrs     []error
	returning   []*attempt // the held attempts given back, whose releases Release answers for
	driver      lockactor.Driver
	out         []func()     // calls into actors, run by do after mu is released
	budget      *clock.Timer // ends a pending composite past its wait budget
	settle      *clock.Timer // bounds how long the end waits for answers
	settleDue   bool         // ... and has fired: the end waits no more
}

type compState uint8

const (
	compPending compState = iota
	compHeld
	compEnding // every attempt is being given back
	compOver
)

// policy is what LockAll and RedLock decide differently. Its methods run
// under the composite's mu.
type policy interface {
	start(c *composite)
	// granted: attempt a of the current round holds (the composite is pending).
	granted(c *composite, a *attempt)
	// ended: attempt a ended without being given back (the composite is pending).
	ended(c *composite, a *attempt)
	// heldLost: attempt a ended while the composite held.
	heldLost(c *composite, a *attempt)
	// joined: attempt a was granted while the composite held.
	joined(c *composite, a *attempt)
	// deadline of the composite hold from its parts' deadlines.
	deadline(c *composite) time.Time
	// unconfirmed: which of errs, one per part whose node did not confirm
	// its release (unconfirmedParts), Release answers.
	unconfirmed(c *composite, errs []error) []error
	// released: a Release may be answered before every part's node has
	// answered for its hold (the rest is released in the background).
	released(c *composite) bool
}

// attempt is one ordinary Lock request for one part.
type attempt struct {
	part     int
	id       lockactor.ReqID // the request's, set before Enqueue
	field    string          // the request's owner field, set before Enqueue
	ref      lockactor.Ref   // zero until Enqueue returned
	held     bool
	over     bool
	err      error // why it ended, once over
	token    uint64
	deadline time.Time
	giveBack bool // a release was asked for
	sent     bool // ... and sent to its actor
	done     bool // the composite's end no longer waits for it (letGo)
	// unconfirmed: the release's first call failed (ReleaseDone's interim
	// answer, wrapping ErrReleaseUnconfirmed) and nothing settled it since.
	unconfirmed error
}

func newComposite(ctx context.Context, what, name string, targets []Target, opts []Option, pol policy) (*composite, *Lock) {
	l := newLock()
	o := applyOptions(opts)
	c := &composite{l: l, what: what, name: name, targets: targets, o: o, pol: pol, cur: make([]*attempt, len(targets))}
	l.ref = lockactor.Ref{To: compositeRef{c}}
	if err := c.check(ctx); err != nil {
		l.end(err)
		return nil, l
	}
	owner, ok, _ := ownerFrom(ctx)
	if ok {
		c.owner = owner
	}
	c.clock = targets[0].Client.cfg.Clock
	if o.wait > 0 {
		c.waitEnd = c.clock.Now().Add(o.wait)
	}
	return c, l
}

// check validates a composite's input: bad input changes nothing.
func (c *composite) check(ctx context.Context) error {
	if len(c.targets) == 0 {
		return fmt.Errorf("%w: %s needs at least one target", ErrInvalidOption, c.what)
	}
	seen := make(map[Target]bool, len(c.targets))
	for _, t := range c.targets {
		if t.Client == nil {
			return fmt.Errorf("%w: %s target %q has a nil Client", ErrInvalidOption, c.what, t.Name)
		}
		if !t.Client.usable() {
			return errNoClient
		}
		if seen[t] {
			return fmt.Errorf("%w: %s names %q on one Client twice", ErrInvalidOption, c.what, t.Name)
		}
		seen[t] = true
		if err := t.Client.check(ctx, t.Name, c.o); err != nil {
			return err
		}
	}
	return nil
}

// run starts the composite and its context watcher.
func (c *composite) run(ctx context.Context) {
	c.do(func() { c.pol.start(c) })
	if ctx.Done() == nil {
		return
	}
	stop := context.AfterFunc(ctx, func() {
		c.l.ref.Send(lockactor.MsgCancel, fmt.Errorf("holdfast: lock context ended: %w", ctx.Err()))
	})
	c.l.setStop(stop)
}

// do runs fn under mu, then the actor calls it queued.
func (c *composite) do(fn func()) {
	c.mu.Lock()
	fn()
	out := c.out
	c.out = nil
	c.mu.Unlock()
	for _, f := range out {
		f()
	}
}

// remaining is the wait budget left: < 0 for no budget (wait forever).
func (c *composite) remaining() time.Duration {
	if c.o.wait < 0 {
		return -1
	}
	if c.o.wait == 0 {
		return 0
	}
	return max(c.waitEnd.Sub(c.clock.Now()), 0)
}

// budgetSpent reports whether a failed round may not be followed by another.
func (c *composite) budgetSpent() bool {
	return c.o.wait == 0 || (c.o.wait > 0 && c.remaining() <= 0)
}

// enqueue starts an attempt on part p with wait budget wait (as Request.Wait).
func (c *composite) enqueue(p int, wait time.Duration) *attempt {
	a := &attempt{part: p}
	c.cur[p] = a
	c.live++
	t := c.targets[p]
	c.out = append(c.out, func() {
		req := t.Client.newRequest(c.owner, c.o.lease, wait, nil, 0)
		a.id, a.field = req.ID, req.Field
		ref, err := t.Client.eng.Enqueue(t.Name, req, attemptHandle{c, a})
		if err != nil {
			attemptHandle{c, a}.Lost(err)
			return
		}
		c.do(func() {
			a.ref = ref
			if d, ok := ref.To.(lockactor.Driver); ok && c.driver == nil {
				c.driver = d
			}
			if a.giveBack {
				c.sendRelease(a)
			}
		})
	})
	return a
}

// giveBack releases attempt a (or cancels it while pending); it is no longer
// its part's live attempt.
func (c *composite) giveBack(a *attempt) {
	if a.giveBack || a.over {
		return
	}
	a.giveBack = true
	if a.held {
		// Attempts whose release was confirmed answer for nothing: drop
		// them, so that a long wait's rounds do not pile up.
		c.returning = slices.DeleteFunc(c.returning, func(r *attempt) bool { return r.over && r.unconfirmed == nil })
		c.returning = append(c.returning, a)
	}
	if c.cur[a.part] == a {
		c.cur[a.part] = nil
	}
	if !a.held {
		// Never seen granted: its actor cancels it, and gives back a grant
		// that may still come (the ambiguous-outcome rule), on its own.
		// Nothing the composite holds waits on it, so a silent node's
		// acquire call cannot hold up the composite's end.
		c.letGo(a)
	}
	if a.ref.To != nil {
		c.sendRelease(a)
	}
}

// letGo stops the composite's end waiting for attempt a: a is over, or
// what is left of it is its actor's to settle in the background.
func (c *composite) letGo(a *attempt) {
	if a.done {
		return
	}
	a.done = true
	c.live--
}

func (c *composite) sendRelease(a *attempt) {
	if a.sent || a.over {
		return
	}
	a.sent = true
	ref := a.ref
	c.out = append(c.out, func() { ref.Send(lockactor.MsgRelease, nil) })
}

// fail ends the composite with cause: every attempt is given back, and Lost
// closes once every node that answers has answered for its hold, so no
// partial hold outlives the composite on a node that can be reached. The
// end waits at most callTimeout (see Ending in the type's doc).
func (c *composite) fail(cause error) {
	if c.state >= compEnding {
		return
	}
	c.stopBudget()
	c.state, c.cause = compEnding, cause
	for _, a := range c.cur {
		if a != nil {
			c.giveBack(a)
		}
	}
	if c.live > 0 {
		c.settle = c.clock.AfterFunc(c.callTimeout(), func() {
			c.do(func() {
				c.settleDue = true
				c.maybeFinish()
			})
		})
	}
	c.maybeFinish()
}

// acquire makes the composite held with the given tokens (in the caller's
// order of targets) and token.
func (c *composite) acquire(token uint64, tokens []uint64) {
	c.stopBudget()
	c.state = compHeld
	c.l.token.Store(token)
	c.l.deadline.Store(c.pol.deadline(c).UnixNano())
	c.l.mu.Lock()
	c.l.extra().tokens = &tokens
	c.l.mu.Unlock()
	close(c.l.acquired())
}

// armBudget bounds a pending composite by its wait budget even when a part
// cannot answer (a part that tries once on an unreachable node retries until
// it hears back). The parts' own wait timers end at the budget and normally
// decide first; this timer, a little later, only catches the stuck ones. It
// is the composite's: stopped when the composite stops pending, a no-op if
// it fires after.
func (c *composite) armBudget() {
	if c.o.wait <= 0 {
		return
	}
	c.budget = c.clock.AfterFunc(c.o.wait+2*wheelTick, func() {
		c.do(func() {
			if c.state == compPending {
				c.fail(fmt.Errorf("holdfast: %s %q: %w (a part did not answer)", c.what, c.name, ErrWaitTimeout))
			}
		})
	})
}

func (c *composite) stopBudget() {
	if c.budget != nil {
		c.budget.Stop()
		c.budget = nil
	}
}

// held returns the live held attempts.
func (c *composite) held() []*attempt {
	var out []*attempt
	for _, a := range c.cur {
		if a != nil && a.held && !a.over {
			out = append(out, a)
		}
	}
	return out
}

func deadlines(as []*attempt) []time.Time {
	out := make([]time.Time, len(as))
	for i, a := range as {
		out[i] = a.deadline
	}
	return out
}

// partErr names the part behind an attempt's error.
func (c *composite) partErr(a *attempt, err error) error {
	t := c.targets[a.part]
	if addr := t.Client.nodeAddr(); addr != "" {
		return fmt.Errorf("holdfast: %s part %q (client %s at %s): %w", c.what, t.Name, t.Client.cfg.ClientID, addr, err)
	}
	return fmt.Errorf("holdfast: %s part %q (client %s): %w", c.what, t.Name, t.Client.cfg.ClientID, err)
}

// nodeAddr is the address (host:port) of the Redis node this Client speaks
// to, for errors that name a composite's nodes: the addresses of all its
// nodes, sorted and joined by commas, on a cluster; "" when the Client has
// no Redis client of its own (a simulated one).
func (cl *Client) nodeAddr() string {
	if cl.cfg.Redis == nil {
		return ""
	}
	return strings.Join(slices.Sorted(maps.Keys(cl.cfg.Redis.Nodes())), ",")
}

// compositeRef is how the Lock handle reaches its composite.
type compositeRef struct{ c *composite }

// Name implements lockactor.Namer: the composite's name.
func (r compositeRef) Name() string { return r.c.name }

func (r compositeRef) Send(_ lockactor.ReqID, kind lockactor.MsgKind, err error) {
	c := r.c
	c.do(func() {
		if c.state >= compEnding {
			return
		}
		switch kind {
		case lockactor.MsgRelease:
			c.userRelease = true
			c.fail(ErrReleased)
		case lockactor.MsgCancel:
			c.fail(err)
		}
	})
}

// Drive implements lockactor.Driver for the simulator: every part of a
// simulated composite lives in one World, so driving one part's runtime
// drives them all.
func (r compositeRef) Drive(ctx context.Context, done ...<-chan struct{}) {
	r.c.mu.Lock()
	d := r.c.driver
	r.c.mu.Unlock()
	if d != nil {
		d.Drive(ctx, done...)
	}
}

// attemptHandle is an attempt's actor side: it implements lockactor.Handle.
type attemptHandle struct {
	c *composite
	a *attempt
}

func (h attemptHandle) Acquired(token uint64, deadline time.Time) {
	c, a := h.c, h.a
	c.do(func() {
		a.held, a.token, a.deadline = true, token, deadline
		if a.giveBack {
			return
		}
		switch c.state {
		case compPending:
			c.pol.granted(c, a)
		case compHeld:
			c.pol.joined(c, a)
		}
	})
}

// RequestID and OwnerField give the part's request and owner field again
// (lockactor.Giver): its actor may then keep the hold asleep.
func (h attemptHandle) RequestID() lockactor.ReqID { return h.a.id }

func (h attemptHandle) OwnerField() string { return h.a.field }

func (h attemptHandle) SetDeadline(d time.Time) {
	c, a := h.c, h.a
	c.do(func() {
		a.deadline = d
		if c.state == compHeld && !a.giveBack {
			c.l.deadline.Store(c.pol.deadline(c).UnixNano())
		}
	})
}

func (h attemptHandle) ReleaseDone(err error) {
	c := h.c
	c.do(func() {
		switch {
		case errors.Is(err, lockactor.ErrReleaseUnconfirmed):
			// The node did not take the release (down, or silent for a
			// call's timeout): its key can only run out now, and the actor
			// goes on releasing it in the background.
			if !h.a.done {
				h.a.unconfirmed = err
			}
			c.letGo(h.a)
			c.maybeFinish()
		default:
			h.a.unconfirmed = nil // settled
			if err != nil && c.userRelease && c.state < compOver {
				c.relErrs = append(c.relErrs, c.partErr(h.a, err))
			}
		}
	})
}

func (h attemptHandle) Lost(err error) {
	c, a := h.c, h.a
	c.do(func() {
		if a.over {
			return
		}
		a.over, a.err = true, err
		c.letGo(a)
		if c.cur[a.part] == a {
			c.cur[a.part] = nil
			if !a.giveBack {
				switch c.state {
				case compPending:
					c.pol.ended(c, a)
				case compHeld:
					a.held = false
					c.pol.heldLost(c, a)
				}
			}
		}
		c.maybeFinish()
	})
}
