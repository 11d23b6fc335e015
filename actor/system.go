// Package actor runs holdfast's lock state machines (package lockactor) on
// protoactor-go: one actor per lock name per client. It carries out the
// machines' effects — script calls whose replies come back as messages,
// timers on the hashed wheel that come back as messages, subscriptions to the
// lock's channel, renewals through the batching watchdog, and signals to the
// caller's Lock handles — and it passivates idle actors. It is holdfast's
// machinery, importable only because the module keeps its packages at the
// top level: it has no compatibility promise and may change in any release.
// Use package holdfast.
//
// # Concurrency
//
// A System owns every goroutine it starts: the protoactor mailboxes, one
// goroutine per script call in flight, the renewal batches, the pub/sub
// connection and the wheel's ticker. Close stops them all and waits. Each
// lock's state is touched only by its actor; callers reach it through
// messages, and hear back through the Handle they registered, whose methods
// are called from the actor's goroutine, one at a time.
package actor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"
	"github.com/benbjohnson/clock"

	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/pubsub"
	"github.com/holdfast/holdfast/renewal"
	"github.com/holdfast/holdfast/timerwheel"
)

// Subscriber is what the runtime needs from pub/sub (package pubsub).
type Subscriber interface {
	Subscribe(channel string, fn func(pubsub.Event)) (unsubscribe func())
}

// Config configures a System.
type Config struct {
	Redis      Redis
	Subscriber Subscriber
	Clock      clock.Clock
	Wheel      *timerwheel.Wheel
	Renewer    *renewal.Batcher
	Logger     *slog.Logger
	Machine    lockactor.Config
	// CallTimeout bounds every script call, on the injected clock.
	CallTimeout time.Duration
	// CallMany, when set, runs the script calls that queue up while others
	// are on the wire in batches (Rueidis.CallMany); nil: each call on its
	// own (as Synced needs).
	CallMany CallMany
	// IdleTimeout is how long an idle actor lives before it passivates, so
	// that a lock taken again and again keeps its actor. Default 1s.
	IdleTimeout time.Duration
}

// System is the set of lock actors of one client.
type System struct {
	cfg Config
	// epoch is the time, from Config.Clock at New, that sleeping records
	// keep their deadlines from (lockactor.Dormant).
	epoch time.Time
	// root is the process's protoactor system's (see shared), which this
	// System uses from New until Close.
	root *protoactor.RootContext

	// calls is the context of every script call; cancelCalls aborts them.
	calls context.Context
	// wallClock: Config.Clock is the real clock (clock.New), so the end of
	// a call bucket may be given to its context as a deadline (callBucket).
	wallClock   bool
	cancelCalls context.CancelFunc
	inflight    sync.WaitGroup // script calls in flight
	bucket      atomic.Pointer[callBucket]
	bucketMu    sync.Mutex // serializes the replacement of bucket
	workers     *pool      // goroutines of the actors and their calls

	// The send queue of script calls (with Config.CallMany; see sendBatches).
	sendMu  sync.Mutex
	sendQ   []*scriptCall
	senders int // sendBatches goroutines running
	// sendBufs are the buffers of senders that ended, for the next ones.
	sendBufs []*sendBuf
	sendFn   func() // s.sendBatches, bound once
	props    *protoactor.Props

	mu     sync.Mutex // guards the fields below, and every entry
	actors registry   // entries by name (registry.go)
	asleep int        // entries asleep
	// naps are the buckets of sleeping records by the wheel tick they
	// are due in: each the first entry of a list (sleep.go). A bucket
	// whose wheel timer is set is in the map, if empty with a nil list.
	naps   map[int64]*entry
	closed bool
	empty  chan struct{} // closed when actors becomes empty after Close began
}

// entry is a lock name in the registry: a live actor, or a record asleep
// in its place (see sleep.go).
//
// An entry is the Sender of its requests' Refs (Send), so that a Ref stays
// good while its actor sleeps and wakes.
type entry struct {
	sys  *System
	name string
	// pid is the actor's; nil while the entry sleeps.
	pid *protoactor.PID
	// enqueues counts the letters sent through the entry (requests,
	// releases, cancellations, a sleeping record's news) and not yet
	// received: an actor passivates or sleeps only when it is zero, so no
	// letter is ever sent to an actor that has stopped. It rises under
	// System.mu and falls without it, by the actor only (received): the
	// actor reads it under System.mu, so it sees every rise before it and
	// its own falls, and no rise can slip in while it decides.
	enqueues atomic.Int32
	// gone: the entry left the registry (its actor passivated or stopped).
	gone bool
	// asleep: rec and handle are the record of a sleeping entry, from the
	// moment the actor sleeps until its next incarnation claims it
	// (claim). The fields below are a sleeping entry's (sleep.go).
	asleep bool
	// filed: the entry is in its nap bucket's list (napLocked), between
	// prev and next.
	filed      bool
	prev, next *entry
	handle     lockactor.Handle
	rec        lockactor.Dormant
}

// New returns a System. Its actors are spawned on demand.
func New(cfg Config) *System {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	as := joinShared(cfg.Logger)
	ctx, cancel := context.WithCancel(context.Background())
	s := &System{
		cfg:         cfg,
		epoch:       cfg.Clock.Now(),
		root:        as.Root,
		calls:       ctx,
		wallClock:   IsWallClock(cfg.Clock),
		cancelCalls: cancel,
		workers:     newPool(300),
		naps:        make(map[int64]*entry),
	}
	// Every incarnation starts blank and reads its lock name from its PID
	// (lockActorName).
	s.props = protoactor.PropsFromProducer(func() protoactor.Actor { return &lockActor{sys: s} },
		protoactor.WithDispatcher(s.workers), protoactor.WithMailbox(newMailbox))
	if s.cfg.IdleTimeout <= 0 {
		s.cfg.IdleTimeout = DefaultIdleTimeout
	}
	s.sendFn = s.sendBatches
	return s
}

// DefaultIdleTimeout is Config.IdleTimeout's default.
const DefaultIdleTimeout = time.Second

// ErrClosed is returned by Enqueue after Close.
var ErrClosed = lockactor.ErrClosed

// Send delivers a message about request id (Cancel or Release) to the
// entry's actor, waking it if it sleeps. A Release runs the actor's turn
// on the caller's goroutine if the actor is idle (see
// mailbox.PostUserMessage).
func (e *entry) Send(id lockactor.ReqID, kind lockactor.MsgKind, err error) {
	l := newLetter(tagMsg)
	l.msg = lockactor.Msg{Kind: kind, ID: id, Err: err}
	l.now = kind == lockactor.MsgRelease
	e.sys.deliver(e, l)
}

// Name implements lockactor.Namer: the entry's lock name.
func (e *entry) Name() string { return e.name }

// deliver sends l through entry e: to its actor, woken first if it sleeps.
// The letter is counted until received (entry.enqueues). An entry gone from
// the registry has an actor that stopped idle: every request it served had
// ended (and closed its Lost) before, so a letter about one of them is
// dropped here rather than sent to the stopped actor as a dead letter. A
// Release that saw its Lock still pending just before it ended gets here.
func (s *System) deliver(e *entry, l *letter) {
	s.mu.Lock()
	if e.gone {
		s.mu.Unlock()
		l.free()
		return
	}
	pid := s.readyLocked(e, l)
	s.mu.Unlock()
	s.root.Send(pid, l)
}

// readyLocked is deliver's part under s.mu: it wakes e if it sleeps,
// counts l and returns the pid to send l to once s.mu is released. A
// caller that decided under s.mu to send l calls it before releasing s.mu,
// so that nothing can stop the actor in between.
func (s *System) readyLocked(e *entry, l *letter) *protoactor.PID {
	pid := s.wakeLocked(e)
	if !e.gone {
		e.enqueues.Add(1)
		l.counted = true
	}
	return pid
}

// Enqueue starts request req on the actor of name, spawning it if needed.
func (s *System) Enqueue(name string, req lockactor.Request, h lockactor.Handle) (lockactor.Ref, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return lockactor.Ref{}, ErrClosed
	}
	e := s.actors.get(name)
	if e == nil {
		e = &entry{sys: s, name: name}
		e.pid = s.root.SpawnPrefix(s.props, name)
		s.actors.put(e)
	}
	pid := s.wakeLocked(e)
	e.enqueues.Add(1)
	s.mu.Unlock()
	ref := lockactor.Ref{To: e, ID: req.ID}
	// The actor meets h only in the letter: h has its Ref before it.
	lockactor.Bind(h, ref)
	l := newLetter(tagEnqueue)
	l.msg.Req, l.handle, l.now, l.counted = req, h, true, true
	s.root.Send(pid, l)
	return ref, nil
}

// received notes that a counted letter reached the actor of entry e.
func (s *System) received(e *entry) {
	e.enqueues.Add(-1)
}

// passivate removes the actor of name from the registry if no request is on
// its way to it, and reports whether it did; the actor then stops itself.
func (s *System) passivate(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.actors.get(name)
	if e == nil || e.enqueues.Load() > 0 {
		return false
	}
	e.gone = true
	s.actors.remove(e)
	if s.closed && s.actors.len() == 0 {
		close(s.empty)
	}
	return true
}

// forget removes the actor of name from the registry whatever it was doing:
// it stopped outside passivation.
func (s *System) forget(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.actors.get(name)
	if e == nil {
		return
	}
	e.gone = true
	s.actors.remove(e)
	if s.closed && s.actors.len() == 0 {
		close(s.empty)
	}
}

// Crash makes the actor of name panic, if it is alive. It exists for tests
// of supervision: the actor restarts, ends its requests with an error and
// releases what it may hold.
func (s *System) Crash(name string) {
	s.mu.Lock()
	var pid *protoactor.PID
	if e := s.actors.get(name); e != nil {
		pid = s.wakeLocked(e)
	}
	s.mu.Unlock()
	if pid != nil {
		s.root.Send(pid, newLetter(tagCrash))
	}
}

// Actors reports how many lock actors are alive (not asleep).
func (s *System) Actors() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.actors.len() - s.asleep
}

// Sleeping reports how many held locks sleep as records (see sleep.go).
func (s *System) Sleeping() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asleep
}

// Close ends every request with ErrClosed (held ones are released, one try
// each), waits for every actor to finish, and stops every goroutine the
// System started. ctx bounds the wait: when it ends, calls still in flight
// are aborted and Close returns ctx.Err() after they return.
func (s *System) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.empty = make(chan struct{})
	if s.actors.len() == 0 {
		close(s.empty)
	}
	type shutdown struct {
		pid *protoactor.PID
		l   *letter
	}
	sends := make([]shutdown, 0, s.actors.len())
	for e := range s.actors.all() {
		// A sleeping lock wakes to be released like the others. The
		// letter counts, as deliver's do, so the actor cannot passivate
		// before it arrives.
		l := newLetter(tagMsg)
		l.msg = lockactor.Msg{Kind: lockactor.MsgShutdown, Err: ErrClosed}
		l.counted = true
		e.enqueues.Add(1)
		sends = append(sends, shutdown{s.wakeLocked(e), l})
	}
	s.mu.Unlock()
	for _, sd := range sends {
		s.root.Send(sd.pid, sd.l)
	}
	var err error
	select {
	case <-s.empty:
	case <-ctx.Done():
		err = ctx.Err()
		s.cancelCalls()
		<-s.empty
	}
	s.cancelCalls()
	s.inflight.Wait()
	s.workers.close()
	leaveShared(s.cfg.Logger)
	return err
}

// call runs fn in a goroutine owned by the System with a context that ends
// after CallTimeout (up to one wheel tick more) on the injected clock, or
// when the System aborts calls.
func (s *System) call(fn func(ctx context.Context)) {
	s.inflight.Add(1)
	b := s.callBucket(s.cfg.Clock.Now())
	s.workers.Go(func() {
		defer s.inflight.Done()
		defer b.leave()
		fn(b.ctx)
	})
}

// callBucket returns a joined bucket whose context ends between CallTimeout
// and CallTimeout plus one wheel tick from now, the injected clock's time
// just before the call is made. Calls made within one tick share it — one
// context and one wheel timer per tick instead of per call.
func (s *System) callBucket(now time.Time) *callBucket {
	due := now.Add(s.cfg.CallTimeout)
	if b := s.bucket.Load(); b != nil && !b.until.Before(due) && b.join() {
		return b
	}
	s.bucketMu.Lock()
	defer s.bucketMu.Unlock()
	if b := s.bucket.Load(); b != nil && !b.until.Before(due) && b.join() {
		return b
	}
	b := &callBucket{until: due.Add(s.cfg.Wheel.Tick())}
	if s.wallClock {
		// The context states its end as a deadline, as rueidis needs to
		// send a call from the calling goroutine while nobody else uses the
		// connection (one round trip, no hand-off to its writer and reader
		// goroutines). A context that can end but has no deadline switches
		// the connection to pipelining for good, and every later call on it,
		// the application's own included, pays those hand-offs.
		b.ctx, b.cancel = context.WithDeadline(s.calls, b.until)
	} else {
		// A deadline on a mock clock's time would reach rueidis as a
		// connection deadline in the past; the wheel ends the bucket.
		b.ctx, b.cancel = context.WithCancel(s.calls)
	}
	b.users.Store(1)
	b.timer = s.cfg.Wheel.Schedule(b.until, b.cancel)
	s.bucket.Store(b)
	return b
}

// IsWallClock reports whether c is the real clock of package clock (New),
// whose times a context deadline may carry: rueidis sends a call that has a
// deadline on its synchronous path when nobody else uses the connection.
func IsWallClock(c clock.Clock) bool {
	return c != nil && reflect.TypeOf(c) == reflect.TypeOf(clock.New())
}

// callBucket is the context of the script calls made within one wheel tick.
// The last call to leave it retires it — stops its timer, so that an idle
// Client's wheel holds no timer and stops ticking — and later calls make a
// new one.
type callBucket struct {
	until  time.Time
	ctx    context.Context
	cancel context.CancelFunc
	timer  *timerwheel.Timer
	users  atomic.Int32 // calls in it; -1 once retired
}

func (b *callBucket) join() bool {
	for {
		n := b.users.Load()
		if n < 0 {
			return false
		}
		if b.users.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (b *callBucket) leave() {
	if b.users.Add(-1) == 0 && b.users.CompareAndSwap(0, -1) {
		b.timer.Stop()
		b.cancel()
	}
}

// closing reports whether Close has begun.
func (s *System) closing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// errPanicked wraps the value an actor panicked with.
var errPanicked = errors.New("holdfast: lock actor failed")

func panicError(reason any) error { return fmt.Errorf("%w: %v", errPanicked, reason) }
