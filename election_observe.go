package holdfast

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/pubsub"
	"github.com/holdfast/holdfast/scripts"
	"github.com/holdfast/holdfast/timerwheel"
)

// Observe streams name's leadership: the state at subscription first, then
// every change — a new leader, and Leader{} once nobody leads (the leader
// resigned, or its lease ran out). A reader that falls behind gets the
// latest state (the channel holds one state, and a newer one replaces it
// unread: changes in between may be skipped, never reordered). A state may
// be told twice; a vacancy between a resignation and the next grant may be
// skipped.
//
// Terms never go backwards while Redis keeps its data: a leader older than
// one already told is never sent. They go back only across a loss of
// Redis's data — a failover that lost the last grant can give its term to
// another leader, a restart without persistence starts terms again at 1 —
// and Observe then sends the leader Redis holds afterwards, whatever its
// term: a state that differs from the one told last is news. (Each Client
// reads a name one read at a time, each read one atomic call, so without
// such a loss its reads see the terms rise as Redis grants them.)
//
// Err tells "Redis cannot be read" from "nobody leads": a read that fails
// is sent once, as a state with Err set (wrapping the read's error) and
// Value and Term of the last state read; Observe reads again after a
// backoff (50 ms, doubling to 1 s) and sends the first state it reads,
// changed or not. Term 0 with Err nil is a vacancy Redis showed.
//
// A grant or a resignation is told within a round trip of its announcement.
// An expiry is not announced by Redis: Observe learns it at the end of the
// leader's lease (a timer at its remaining TTL, then a read), so a crashed
// leader's vacancy is told within a wheel tick and a round trip of its
// lease's end. While nothing changes nothing is sent, and a Client reads
// Redis only when a message comes, when its subscription is made, re-made
// or its connection lost, and when the TTL it last read runs out: while a
// live leader renews (every third of its lease), that read comes every two
// thirds of a lease to a whole lease (every 20 to 30 s with the default
// 30 s lease). A Redis that stops answering without dropping connections (a
// frozen process, a silent network) is noticed at the next of those reads,
// or once the Redis client drops the connection (rueidis pings a quiet
// connection and drops it when the ping goes unanswered: within 10 to 20 s
// with its default ConnWriteTimeout), whichever comes first.
//
// Every observer of a name in one Client shares one subscription (with the
// Client's candidates of the name, too) and one read per change. The
// channel closes when ctx ends, with nothing more sent; for any other
// reason it closes after a last state whose Err says why: ErrClosed when
// the Client closes (or was closed), and at once ErrInvalidName for a bad
// name, ErrNotSupported under LayoutRedisson, ErrInvalidOption for a nil
// ctx or a Client without a Redis client of its own (the simulator's). A
// name in use as another kind of lock reads as nobody leading.
func (c *Client) Observe(ctx context.Context, name string) <-chan Leader {
	ch := make(chan Leader, 1)
	if err := c.observable(ctx, name); err != nil {
		ch <- Leader{Err: err}
		close(ch)
		return ch
	}
	c.elections.observe(ctx, name, ch)
	return ch
}

// errNoObserver answers Observe on a Client without a Redis client of its
// own (the simulator's: sim.World.Observe observes there).
var errNoObserver = fmt.Errorf("%w: Client has no Redis client to observe with", ErrInvalidOption)

// observable checks the arguments of Observe.
func (c *Client) observable(ctx context.Context, name string) error {
	switch {
	case ctx == nil:
		return fmt.Errorf("%w: nil context", ErrInvalidOption)
	case !c.usable():
		return errNoClient
	case c.elections == nil:
		return errNoObserver
	}
	if err := scripts.ValidateName(name); err != nil {
		return err
	}
	if c.cfg.Layout == LayoutRedisson {
		return fmt.Errorf("%w: elections under the Redisson layout (Redisson has no such object)", ErrNotSupported)
	}
	return nil
}

// electionHub keeps the Client's observed elections: one subscription, one
// reading goroutine and one state per name, shared by its observers.
//
// Concurrency: the hub owns one goroutine per observed name (run), started
// by the name's first observer and ended when its last observer leaves or
// the hub closes; close waits for them. Every observer channel has one
// closer, the hub, under mu, which also orders every send on it. pub/sub
// listeners and wheel timers only poke a name's kick channel.
type electionHub struct {
	cfg   Config
	subs  *pubsub.Manager
	wheel *timerwheel.Wheel
	// ctx bounds the reads; close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the names' goroutines

	mu     sync.Mutex // guards the fields below and the *Locked fields of observed
	names  map[string]*observed
	closed bool
}

// observed is one observed election name.
type observed struct {
	name string
	kick chan struct{} // 1-buffered: read Redis again
	quit chan struct{} // closed when the name stops being observed
	// unsubscribe ends the name's pub/sub listener.
	unsubscribe func()

	watchersLocked map[*watcher]struct{}
	timerLocked    *timerwheel.Timer // the leader's lease end, or a retry after an error
	// viewLocked decides what is news and when to read again (shared
	// with the simulator's observers).
	viewLocked lockactor.Observer
}

// watcher is one Observe call.
type watcher struct {
	ch   chan Leader
	stop func() bool // stops the context hook
}

func newElectionHub(cfg Config, subs *pubsub.Manager, wheel *timerwheel.Wheel) *electionHub {
	ctx, cancel := context.WithCancel(context.Background())
	return &electionHub{cfg: cfg, subs: subs, wheel: wheel, ctx: ctx, cancel: cancel, names: make(map[string]*observed)}
}

// observe adds ch as an observer of name until ctx ends or the hub closes.
func (h *electionHub) observe(ctx context.Context, name string, ch chan Leader) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		ch <- Leader{Err: ErrClosed}
		close(ch)
		return
	}
	o := h.names[name]
	if o == nil {
		o = &observed{name: name, kick: make(chan struct{}, 1), quit: make(chan struct{}),
			watchersLocked: make(map[*watcher]struct{})}
		h.names[name] = o
		// Every event asks for a read: Subscribed (read once Redis would
		// tell every later change), a message (a grant or resignation), a
		// Resync (messages may have been lost), Lost (the connection
		// broke: Redis may be gone, which a failed read tells). Reading
		// after Subscribed is what makes the first state current.
		o.unsubscribe = h.subs.Subscribe(scripts.Channel(name), func(pubsub.Event) { poke(o.kick) })
		h.wg.Add(1)
		go h.run(o)
	}
	w := &watcher{ch: ch}
	o.watchersLocked[w] = struct{}{}
	if st, ok := o.viewLocked.Told(); ok {
		ch <- Leader(st) // the latest state, a failure to read included
	}
	w.stop = context.AfterFunc(ctx, func() { h.leave(o, w) })
}

// leave ends watcher w of o; the last one ends o.
func (h *electionHub) leave(o *observed, w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := o.watchersLocked[w]; !ok {
		return // the hub closed it
	}
	delete(o.watchersLocked, w)
	close(w.ch)
	if len(o.watchersLocked) == 0 {
		h.endLocked(o)
	}
}

// endLocked stops observing o. The listener only pokes, so ending it under
// mu cannot wait for anything that needs mu.
func (h *electionHub) endLocked(o *observed) {
	delete(h.names, o.name)
	close(o.quit)
	o.unsubscribe()
	if o.timerLocked != nil {
		o.timerLocked.Stop()
	}
}

// close sends every observer a last state with ErrClosed, closes its
// channel, and waits for the names' goroutines. Idempotent.
func (h *electionHub) close() {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		for _, o := range h.names {
			st, _ := o.viewLocked.Told()
			for w := range o.watchersLocked {
				w.stop()
				replace(w.ch, Leader{Value: st.Value, Term: st.Term, Err: ErrClosed})
				close(w.ch)
			}
			clear(o.watchersLocked)
			h.endLocked(o)
		}
	}
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
}

// run reads o's election whenever it is poked, until o ends.
func (h *electionHub) run(o *observed) {
	defer h.wg.Done()
	for {
		select {
		case <-o.kick:
		case <-o.quit:
			return
		}
		// The lease the read reports runs from when the script ran, after
		// this: counting it from here looks at or before its end, even when
		// the reply comes late (a slow network, a paused process).
		sent := h.cfg.Clock.Now()
		st, err := h.read(o.name)
		h.mu.Lock()
		select {
		case <-o.quit:
			h.mu.Unlock()
			return
		default:
		}
		if err != nil {
			// Tell the failure once; read again after a backoff (a
			// Resync will poke too once the connection is back).
			tell, next := o.viewLocked.Failed(fmt.Errorf("holdfast: reading the leader of %q: %w", o.name, err))
			if tell {
				h.tellLocked(o)
			}
			h.armLocked(o, h.cfg.Clock.Now().Add(next))
			h.mu.Unlock()
			continue
		}
		tell, next, arm := o.viewLocked.Read(lockactor.LeaderState(st.Leader), st.TTL)
		if tell {
			h.tellLocked(o)
		}
		switch {
		case arm:
			// Redis announces no expiry: look again when the lease ends.
			h.armLocked(o, sent.Add(next))
		case o.timerLocked != nil:
			o.timerLocked.Stop()
		}
		h.mu.Unlock()
	}
}

// tellLocked sends o's latest state to its observers.
func (h *electionHub) tellLocked(o *observed) {
	st, _ := o.viewLocked.Told()
	for w := range o.watchersLocked {
		replace(w.ch, Leader(st))
	}
}

// armLocked has o read again at t.
func (h *electionHub) armLocked(o *observed, t time.Time) {
	if o.timerLocked == nil {
		o.timerLocked = new(timerwheel.Timer)
	} else {
		o.timerLocked.Stop()
	}
	h.wheel.Arm(o.timerLocked, t, func() { poke(o.kick) })
}

// replace puts st in ch (1-buffered), dropping an unread older state. Only
// the hub sends on ch, under its mutex, so the second send cannot block.
func replace(ch chan Leader, st Leader) {
	select {
	case ch <- st:
		return
	default:
	}
	select {
	case <-ch:
	default:
	}
	ch <- st
}

// read reads name's election, bounded by the Client's CallTimeout on its
// clock. Another kind's name reads as nobody leading.
func (h *electionHub) read(name string) (electionState, error) {
	ctx, cancel := context.WithCancelCause(h.ctx)
	defer cancel(nil)
	t := h.cfg.Clock.AfterFunc(h.cfg.CallTimeout, func() { cancel(errNoAnswer) })
	defer t.Stop()
	st, err := readElection(ctx, h.cfg.Redis, name)
	switch {
	case errors.Is(err, ErrWrongKind):
		return electionState{}, nil
	case err != nil && context.Cause(ctx) == errNoAnswer:
		// Say why the read ended, not that its context did.
		return st, fmt.Errorf("%w within %v (CallTimeout)", errNoAnswer, h.cfg.CallTimeout)
	}
	return st, err
}

// errNoAnswer ends a read that Redis did not answer within CallTimeout.
var errNoAnswer = errors.New("Redis did not answer")

// poke wakes the goroutine behind a 1-buffered channel.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
