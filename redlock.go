package holdfast

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"time"
)

// RedLock takes the lock name on a majority of independent Redis deployments,
// one Client each, and returns at once, as Lock does.
//
// Each node runs the reentrant lock's own keys and scripts; the requests go
// out in parallel, to every node. The RedLock is held once a majority
// (len(clients)/2+1) granted and time remains; grants that arrive later in
// the same round join the hold rather than being given back, so that with
// every node up the RedLock holds all of them and outlives the loss of any
// minority. Deadline is the time until which a majority keeps the hold,
// never earlier than Redlock's validity (the lease from before the first
// request, less drift). A round that cannot reach a majority gives back
// every node (those that did not answer too) and, while the wait budget
// lasts, tries again (each round's wait is drawn at random, so that
// competing RedLocks that split the nodes stop splitting them); when the
// budget is spent, or a node refuses for a reason waiting cannot fix
// (ErrWrongKind, ErrClosed…), the RedLock ends with ErrNoQuorum. A round
// ends as soon as a majority is out of reach, whatever put it there
// (refusals, errors, a try's call timing out): it does not wait for the
// nodes still being asked, so with WithWait(0) and a majority of refusals
// Lost closes after the refusals' round trip, even with another node
// silent. The error names each node by address (host:port) with what it
// did ("127.0.0.1:7001 refused (held), …, 127.0.0.1:7003 no answer within
// 2ms") and wraps ErrNoQuorum and each node's error. WithWait(0) makes it
// one round of one try per node.
//
// Once held, the watchdog renews on every node that holds; the hold lasts
// while a majority confirms, and Lost closes at the deadline otherwise. A
// node that did not grant, or whose part was lost (it crashed, restarted,
// or lost the key), is asked again in the background for as long as the
// RedLock holds, so that a restarted node restores the tolerance of one
// more failure; a node that refuses for good (ErrWrongKind…) is left alone.
//
// Release (and the end of a RedLock for any other cause) gives back every
// node and returns within a bound that does not depend on the lease: the
// answers of the nodes that can be reached, and at most the Clients'
// CallTimeout. It returns nil when the hold is over on every node that
// answered. On a node that is down (the release call fails at once) or
// silent (no answer within CallTimeout) renewal has stopped and the key can
// only run out; its release is repeated in the background by its Client
// until Redis answers, the lease ends or the Client closes. Grants a node
// may still make for a round that ended are given back the same way.
//
// Token is monotone across holders: it is the highest token of the granting
// majority, T, and before Acquired closes the fence counter is raised to at
// least T on every node that answers (a majority at least; a node that
// joins the hold later is raised too), so that a later majority, which
// shares a node with the raised ones, returns more than T. The assumption:
// between two holds, the raised nodes that keep their data still overlap
// every majority — with 3 nodes all raised, one node may lose data (restart
// without persistence, failover that loses writes); more loss can make
// tokens go backwards. See docs/locks.md for what RedLock does and does not
// protect against.
func RedLock(ctx context.Context, clients []*Client, name string, opts ...Option) *Lock {
	targets := make([]Target, len(clients))
	for i, cl := range clients {
		targets[i] = Target{Client: cl, Name: name}
	}
	p := &redLock{q: quorum(len(clients))}
	c, l := newComposite(ctx, "RedLock", name, targets, opts, p)
	if c == nil {
		return l
	}
	h := fnv.New64a()
	for _, cl := range clients {
		h.Write([]byte(cl.cfg.ClientID))
	}
	p.rng = rand.New(rand.NewPCG(h.Sum64(), clients[0].nextID.Add(1)))
	c.run(ctx)
	return l
}

// redLock is RedLock's policy.
type redLock struct {
	q          int
	rng        *rand.Rand // round jitter; seeded from the Clients
	round      []*attempt
	roundStart time.Time     // when the round's requests went out
	wait       time.Duration // each request's wait in the round
	raising    bool          // a majority granted; the fence calls are out
	floor      uint64        // T, while raising
	raiseSeq   uint64        // numbers the rounds' fence calls
	raised     []int8        // per node: 0 no answer yet, 1 raised to floor, -1 failed
}

func (p *redLock) start(c *composite) { p.newRound(c) }

// roundWait is how long each node's request of a round may wait: a tenth of
// the lease, plus up to half as much again at random so that competing
// RedLocks that split the nodes between them stop splitting them, and never
// more than the wait budget left.
func (p *redLock) roundWait(c *composite) time.Duration {
	lease := c.o.lease
	if lease == 0 {
		lease = c.targets[0].Client.cfg.WatchdogTimeout
	}
	if c.o.wait == 0 {
		return 0 // one try on each node
	}
	base := max(lease/10, 2*wheelTick)
	w := base + time.Duration(p.rng.Int64N(int64(base/2)+1))
	if r := c.remaining(); r > 0 {
		w = min(w, r)
	}
	return w
}

func (p *redLock) newRound(c *composite) {
	p.raising, p.round, p.raised = false, p.round[:0], nil
	w := p.roundWait(c)
	p.roundStart, p.wait = c.clock.Now(), w
	for i := range c.targets {
		p.round = append(p.round, c.enqueue(i, w))
	}
}

func (p *redLock) granted(c *composite, _ *attempt) {
	if p.raising {
		return
	}
	var tokens []uint64
	for _, a := range p.round {
		if a.held && !a.over && !a.giveBack {
			tokens = append(tokens, a.token)
		}
	}
	if len(tokens) < p.q {
		return
	}
	// A majority. The nodes that have not answered yet go on being asked
	// for the rest of the round: a grant that comes later joins the hold,
	// so that the RedLock outlives the loss of any minority of its nodes.
	// Raise the fence on every node, the ones that did not grant too.
	// Raising a counter never harms (tokens only need to grow), and the more
	// nodes carry T, the more data loss a later majority can survive and
	// still overlap one of them.
	p.raising, p.floor = true, fenceFloor(tokens)
	p.raiseSeq++
	seq := p.raiseSeq
	p.raised = make([]int8, len(c.targets))
	for part := range c.targets {
		if a := c.cur[part]; a != nil && a.held && a.token == p.floor {
			// Its counter is T already (counters only grow): no call.
			p.raised[part] = 1
			continue
		}
		c.raiseFence(part, p.floor, func(c *composite, counter uint64, err error) {
			if seq != p.raiseSeq || c.state != compPending || !p.raising {
				return // a fence call of an earlier round
			}
			p.raised[part] = -1
			if err == nil && counter >= p.floor {
				p.raised[part] = 1
			}
			p.checkRaised(c)
		})
	}
	// With the granting nodes' counters in step (the usual case), a
	// majority carries T already and Acquired needs no extra round trip;
	// the other nodes' calls still raise them, for later holders.
	p.checkRaised(c)
}

// checkRaised makes the RedLock held once a majority of nodes hold it and a
// majority raised their counter to T, if time remains; it fails the round
// once either majority is out of reach.
func (p *redLock) checkRaised(c *composite) {
	held := c.held()
	ok, failed := 0, 0
	for _, r := range p.raised {
		switch r {
		case 1:
			ok++
		case -1:
			failed++
		}
	}
	switch {
	case len(held) < p.q:
		p.roundFailed(c, "")
	case failed > len(c.targets)-p.q:
		p.roundFailed(c, "the fence could not be raised on a majority")
	case ok < p.q:
		// wait for more fence calls
	case !c.clock.Now().Before(quorumDeadline(deadlines(held), p.q)):
		p.roundFailed(c, "the majority's lease ran out before the fence was raised")
	default:
		p.raising = false
		c.acquire(p.floor, []uint64{p.floor})
	}
}

func (p *redLock) ended(c *composite, a *attempt) {
	if p.raising {
		p.checkRaised(c)
		return
	}
	failed := 0
	for _, a := range p.round {
		if a.over {
			failed++
		}
	}
	if len(p.round)-failed < p.q {
		// A majority is out of reach: end the round now, without waiting
		// for the nodes still asked (a silent node's call may take a whole
		// CallTimeout; its actor gives back whatever it may grant).
		p.roundFailed(c, "")
	}
}

// roundFailed gives back every node of the round and tries again while the
// budget lasts; why, when not the nodes' answers alone, says what failed.
func (p *redLock) roundFailed(c *composite, why string) {
	granted, final := 0, false
	for _, a := range p.round {
		if a.held && !a.over {
			granted++
		}
		// An error waiting cannot fix (ErrWrongKind, ErrClosed…) ends the
		// RedLock whatever budget is left.
		final = final || a.over && a.err != nil && !errors.Is(a.err, ErrWaitTimeout)
	}
	if c.budgetSpent() || final {
		c.fail(p.noQuorum(c, granted, why))
	}
	for _, a := range p.round {
		c.giveBack(a)
	}
	p.raising = false
	if c.state == compPending {
		p.newRound(c)
	}
}

// noQuorum is the error of a RedLock that ends on a failed round: it says
// what each node did, by address, and wraps ErrNoQuorum and every error a
// node ended with.
func (p *redLock) noQuorum(c *composite, granted int, why string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d of %d nodes granted %q (need %d)", ErrNoQuorum, granted, len(c.targets), c.name, p.q)
	if why != "" {
		fmt.Fprintf(&b, ", %s", why)
	}
	causes := []error{ErrNoQuorum}
	for i, a := range p.round {
		sep := ": "
		if i > 0 {
			sep = ", "
		}
		b.WriteString(sep + nodeLabel(c.targets[a.part].Client) + " " + p.did(c, a))
		if a.over && a.err != nil {
			causes = append(causes, a.err)
		}
	}
	return &noQuorumError{msg: b.String(), causes: causes}
}

// did says what node a did in the round, for noQuorum.
func (p *redLock) did(c *composite, a *attempt) string {
	switch {
	case a.held && !a.over:
		if p.raised != nil && p.raised[a.part] < 0 {
			return "granted (its fence call failed)"
		}
		return "granted"
	case a.over && a.err == ErrWaitTimeout && p.wait == 0:
		return "refused (held)"
	case a.over && a.err == ErrWaitTimeout:
		return fmt.Sprintf("refused (held for the round's %v)", p.wait)
	case a.over && errors.Is(a.err, ErrWaitTimeout):
		// A try that failed: the machine's error wraps the last failure.
		if u, ok := a.err.(interface{ Unwrap() []error }); ok {
			if errs := u.Unwrap(); len(errs) > 1 {
				return fmt.Sprintf("failed (%v)", errs[len(errs)-1])
			}
		}
		return fmt.Sprintf("failed (%v)", a.err)
	case a.over:
		return fmt.Sprintf("failed (%v)", a.err)
	case p.wait == 0:
		return "no answer within " + shortDuration(c.clock.Now().Sub(p.roundStart))
	default:
		return "not granted within " + shortDuration(c.clock.Now().Sub(p.roundStart))
	}
}

// nodeLabel names a RedLock node in errors: its address, or its Client's
// ClientID when the address is unknown (a simulated Client).
func nodeLabel(cl *Client) string {
	if addr := cl.nodeAddr(); addr != "" {
		return addr
	}
	return "client " + cl.cfg.ClientID
}

// shortDuration rounds d for a message: to the millisecond, or to the
// microsecond below one.
func shortDuration(d time.Duration) string {
	if d < time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// noQuorumError is ErrNoQuorum with what each node did.
type noQuorumError struct {
	msg    string
	causes []error // ErrNoQuorum, then the nodes' errors
}

func (e *noQuorumError) Error() string   { return e.msg }
func (e *noQuorumError) Unwrap() []error { return e.causes }

func (p *redLock) heldLost(c *composite, a *attempt) {
	if n := len(c.held()); n < p.q {
		c.fail(fmt.Errorf("holdfast: RedLock %q: %d of %d nodes still hold, a majority is %d: %w",
			c.name, n, len(c.targets), p.q, c.partErr(a, a.err)))
		return
	}
	c.l.deadline.Store(p.deadline(c).UnixNano())
	if retakes(a.err) {
		// Ask the node again, without a wait budget, for as long as the
		// RedLock holds: a node that comes back restores the tolerance of
		// one more failure. fail gives the attempt back with the rest.
		c.enqueue(a.part, -1)
	}
}

// joined: a node granted while the RedLock holds (a late grant of the
// first round, or a node asked again). Its counter is raised to T like the
// others', so that it carries T for later holders even if it lost its data.
func (p *redLock) joined(c *composite, a *attempt) {
	c.l.deadline.Store(p.deadline(c).UnixNano())
	if a.token < p.floor {
		c.raiseFence(a.part, p.floor, func(*composite, uint64, error) {})
	}
}

// retakes reports whether a node whose part ended with err is worth asking
// again while the RedLock holds: it was busy, unreachable or lost its hold,
// not a refusal that asking again would meet again at once.
func retakes(err error) bool {
	return errors.Is(err, ErrWaitTimeout) || errors.Is(err, ErrLeaseExpired) ||
		errors.Is(err, ErrNotOwner) || errors.Is(err, ErrFailover) || errors.Is(err, ErrReplicaSync)
}

func (p *redLock) deadline(c *composite) time.Time { return quorumDeadline(deadlines(c.held()), p.q) }

// unconfirmed: while the nodes that did not confirm leave a majority free
// (confirmed, or never held), another holder can take the lock as soon as it
// could have anyway; only a release that leaves no free majority is told.
// released: once a majority of the nodes is free (confirmed, or never
// held), a rival can take the lock: a node that is down or silent need not
// hold up the answer for a call's timeout.
func (p *redLock) released(c *composite) bool {
	return len(c.targets)-len(c.unconfirmedParts()) >= p.q
}

func (p *redLock) unconfirmed(c *composite, errs []error) []error {
	if len(c.targets)-len(errs) >= p.q {
		return nil
	}
	return errs
}
