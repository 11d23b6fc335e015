package holdfast

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/holdfast/holdfast/actor"
	"github.com/holdfast/holdfast/internal/clientkit"
	"github.com/holdfast/holdfast/internal/observe"
	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/pubsub"
	"github.com/holdfast/holdfast/renewal"
	"github.com/holdfast/holdfast/scripts"
	"github.com/holdfast/holdfast/timerwheel"
)

// Client hands out Locks on one Redis deployment. It runs one actor per lock
// name in use, one timer wheel, one watchdog and one pub/sub connection. A
// Client is safe for concurrent use; Close it when done.
type Client struct {
	cfg      Config
	instance string // the random part of this Client's owner fields
	eng      clientkit.Engine
	obs      *observe.Observer
	closers  []func() // run after the engine closes, in order
	// elections shares one subscription and one state per observed
	// election name among the Client's observers (election_observe.go);
	// nil on a Client without its own Redis client (the simulator's).
	elections *electionHub
	nextID    atomic.Uint64
	// watches watches the contexts of the Client's Locks (ctxwatch.go).
	watches ctxWatches

	closeOnce sync.Once
	closeErr  error
}

// New validates cfg, fills in its defaults and returns a running Client.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	obs, err := observe.New(cfg.Logger, cfg.MeterProvider, cfg.Clock)
	if err != nil {
		return nil, err
	}
	rue := actor.NewRueidis(cfg.Redis)
	var base actor.Redis = rue
	renewMulti := rue.RenewMulti
	if cfg.SyncReplicas > 0 {
		synced := actor.NewSynced(rue, cfg.SyncReplicas, cfg.SyncTimeout)
		base, renewMulti = synced, synced.RenewMulti
	}
	redis := obs.Redis(base)
	renewExec := redis.Renew
	wheel := timerwheel.New(cfg.Clock, wheelTick, wheelSlots)
	// Renewals still in flight when the Client closes are aborted, like
	// every other script call.
	renewCtx, cancelRenewals := context.WithCancel(context.Background())
	rcfg := renewal.Config{
		Clock:   cfg.Clock,
		After:   func(d time.Duration, fn func()) { wheel.Schedule(cfg.Clock.Now().Add(d), fn) },
		Exec:    renewExec,
		Group:   redis.Group(),
		Context: renewCtx,
		Timeout: cfg.CallTimeout,
		// On a cluster, a round's renewals go out one call per node (and
		// batch), each node's calls in one pipeline, with its WAIT under
		// SyncReplicas.
		ExecMulti: redis.RenewMulti(renewMulti),
		Prepare:   rue.PrepareRenewals,
	}
	var callMany actor.CallMany
	if cfg.SyncReplicas == 0 {
		// Without WAIT, the actors' calls that queue up go out together.
		callMany = redis.CallMany(rue.CallMany)
	}
	renew := renewal.New(rcfg)
	subs := pubsub.New(pubsub.Config{Redis: cfg.Redis, Clock: cfg.Clock, Logger: cfg.Logger})
	sys := actor.New(actor.Config{
		Redis:       redis,
		Subscriber:  subs,
		Clock:       cfg.Clock,
		Wheel:       wheel,
		Renewer:     renew,
		Logger:      cfg.Logger,
		Machine:     cfg.machine(),
		CallTimeout: cfg.CallTimeout,
		CallMany:    callMany,
		IdleTimeout: idleTimeout,
	})
	wheel.Start()
	hub := newElectionHub(cfg, subs, wheel)
	return &Client{cfg: cfg, instance: newInstance(), eng: sys, obs: obs, elections: hub,
		closers: []func(){hub.close, cancelRenewals, renew.Close, subs.Close, wheel.Stop}}, nil
}

func init() {
	clientkit.NewClient = func(cfg any, e clientkit.Engine, closers ...func()) (any, error) {
		c, ok := cfg.(Config)
		if !ok {
			return nil, fmt.Errorf("%w: clientkit.NewClient needs a holdfast.Config", ErrInvalidOption)
		}
		// The engine brings its own Redis: Config.Redis may be nil.
		if err := c.validateOptions(); err != nil {
			return nil, err
		}
		c.setDefaults()
		obs, err := observe.New(c.Logger, c.MeterProvider, c.Clock)
		if err != nil {
			return nil, err
		}
		instance := newInstance()
		if in, ok := e.(interface{ Instance() string }); ok {
			// A simulator names its Clients itself, so that a run replays.
			instance = in.Instance()
		}
		return &Client{cfg: c, instance: instance, eng: e, obs: obs, closers: closers}, nil
	}
}

// ClientID returns the label at the head of this Client's owner fields.
func (c *Client) ClientID() string {
	if c == nil {
		return ""
	}
	return c.cfg.ClientID
}

// errNoClient is the answer of every method of a Client not made by New.
var errNoClient = fmt.Errorf("%w: Client not made by holdfast.New", ErrInvalidOption)

// usable reports whether c was made by New (or NewClient of clientkit).
func (c *Client) usable() bool { return c != nil && c.eng != nil }

// Close ends every pending Lock with ErrClosed, releases every held one (one
// try each: a hold whose release fails runs out with its lease), waits for
// that, and stops every goroutine the Client started. Locks ended this way
// report ErrClosed. Close is idempotent; Lock after Close returns a Lock that
// is already over with ErrClosed.
func (c *Client) Close() error {
	if !c.usable() {
		return errNoClient
	}
	c.closeOnce.Do(func() {
		c.closeErr = c.eng.Close(context.Background())
		c.watches.close()
		for _, fn := range c.closers {
			fn()
		}
	})
	return c.closeErr
}

// Lock asks for the lock name and returns at once; the lock is acquired in
// the background. Select on the returned Lock's Acquired and Lost channels,
// or call Wait.
//
// ctx bounds the whole life of the Lock, acquisition and hold: when it ends,
// a pending Lock gives up and a held one is released, and Err then wraps
// ctx.Err(). A forgotten Release in request-scoped code therefore cannot hold
// a lock forever. Use context.WithoutCancel for a Lock that outlives its
// request.
//
// Bad input (see ErrInvalidName, ErrInvalidOption) and a closed Client give a
// Lock that is already over, its Err saying why.
func (c *Client) Lock(ctx context.Context, name string, opts ...Option) *Lock {
	return c.request(ctx, name, lockactor.Reentrant, 0, opts)
}

// request starts a Lock call of the given kind and mode: the body every
// kind's entry point (Lock, FairLock, …) shares.
func (c *Client) request(ctx context.Context, name string, kind *lockactor.Kind, mode uint8, opts []Option) *Lock {
	return c.requestValue(ctx, name, kind, mode, "", opts)
}

// requestValue is request with the kind-defined Value of the request (an
// election's announced value).
func (c *Client) requestValue(ctx context.Context, name string, kind *lockactor.Kind, mode uint8, value string, opts []Option) *Lock {
	o := applyOptions(opts)
	if !c.usable() {
		return endedLock(name, errNoClient)
	}
	if err := c.check(ctx, name, o); err != nil {
		return endedLock(name, err)
	}
	kind, err := c.layoutKind(kind)
	if err != nil {
		return endedLock(name, err)
	}
	l := newLock()
	owner, _, _ := ownerFrom(ctx)
	req := c.newRequest(owner, o.lease, o.wait, kind, mode)
	req.Value = value
	l.c, l.times, l.ref.ID = c, c.obs.Start(), req.ID
	if owner != "" || kind != nil && kind.HoldField != nil {
		// A field the Client cannot build again from the ID (ownerField).
		l.mu.Lock()
		l.extra().field = req.Field
		l.mu.Unlock()
	}
	// The engine gives the handle its Ref (handle.Bind) before its machine
	// can call the handle, whose log lines name the lock from it.
	if _, err := c.eng.Enqueue(name, req, handle{l}); err != nil {
		l.ref.To = unstarted(name)
		handle{l}.Lost(err)
		return l
	}
	if ctx.Done() == nil {
		return l // a context that never ends needs no watching
	}
	c.watches.add(ctx, l)
	return l
}

// setStop keeps the context watcher's stop for end, or calls it if l is
// already over.
func (l *Lock) setStop(stop func() bool) {
	l.mu.Lock()
	if l.over {
		l.mu.Unlock()
		stop()
		return
	}
	l.extra().stop = stop
	l.mu.Unlock()
}

// newRequest builds the request of one Lock call (of a Lock, or of a
// composite's part) for the machine: its ID, its owner field (owner "" gives
// the request an owner of its own), its lease (the watchdog's when lease is
// 0) and wait budget, and its kind (nil: the reentrant lock) and mode.
func (c *Client) newRequest(owner string, lease, wait time.Duration, kind *lockactor.Kind, mode uint8) lockactor.Request {
	id := c.nextID.Add(1)
	var field string
	switch {
	case c.cfg.Layout == LayoutRedisson && owner != "":
		field = scripts.RedissonField(c.cfg.ClientID+"-"+c.instance, owner, id)
	case owner != "":
		field = scripts.Field(c.cfg.ClientID, c.instance, owner)
	default:
		field = c.anonymousField(id)
	}
	if c.cfg.Layout == LayoutRedisson && kind == nil {
		kind = lockactor.RedissonLock // a composite's part
	}
	req := lockactor.Request{
		ID:       lockactor.ReqID(id),
		Field:    field,
		Lease:    lease,
		Watchdog: lease == 0,
		Wait:     wait,
		Kind:     kind,
		Mode:     mode,
	}
	if req.Watchdog {
		req.Lease = c.cfg.WatchdogTimeout
	}
	if kind != nil && kind.HoldField != nil {
		req.Field = kind.HoldField(req.Field, mode)
	}
	return req
}

// layoutKind maps a kind to the one the Client's Layout speaks for it, or
// ErrNotSupported.
// anonymousField is the owner field of the Client's request id made
// without an owner: every such request is an owner of its own.
func (c *Client) anonymousField(id uint64) string {
	if c.cfg.Layout == LayoutRedisson {
		return scripts.RedissonField(c.cfg.ClientID+"-"+c.instance, "", id)
	}
	return anonymousField(c.cfg.ClientID, c.instance, id)
}

func (c *Client) layoutKind(kind *lockactor.Kind) (*lockactor.Kind, error) {
	if c.cfg.Layout != LayoutRedisson {
		return kind, nil
	}
	switch kind {
	case nil, lockactor.Reentrant:
		return lockactor.RedissonLock, nil
	case lockactor.ReadWrite:
		return lockactor.RedissonRW, nil
	case lockactor.Fair:
		return lockactor.RedissonFair, nil
	}
	return nil, fmt.Errorf("%w: %s under the Redisson layout (Redisson's keys for it differ; see README, Sharing locks with Java)", ErrNotSupported, kind.Name)
}

func (c *Client) check(ctx context.Context, name string, o lockOptions) error {
	if ctx == nil {
		return errNilContext
	}
	if err := scripts.ValidateName(name); err != nil {
		return err
	}
	if o.err != nil {
		return o.err
	}
	if _, _, err := ownerFrom(ctx); err != nil {
		return err
	}
	return nil
}

// Actors reports how many lock actors the Client runs now: one per lock name
// with a pending or held Lock, or with Redis work in flight. Idle actors stop,
// and a lock held quietly (one Lock, nothing waiting) for a second sleeps as a
// small record that renews its lease and wakes an actor when needed: it is
// not counted.
func (c *Client) Actors() int {
	if !c.usable() {
		return 0
	}
	return c.eng.Actors()
}

// Lock is one Lock call: pending, then held, then over. Its channels are the
// way to follow it; its methods are safe for concurrent use. Get one from
// Client.Lock: the methods of a zero or nil Lock never panic, Wait and
// Release answer ErrInvalidOption and Err says the same.
type Lock struct {
	// Acquired is closed once the lock is held. It is never closed if the
	// Lock ends before being granted. Its closer is the lock's actor.
	Acquired <-chan struct{}
	// Lost is closed once this Lock is over, for any reason: acquisition gave
	// up, the hold was lost, or Release finished. Err then says why. A
	// goroutine selecting on Lost is never stranded. Its closer is the lock's
	// actor (or Lock itself for a Lock that never started).
	Lost <-chan struct{}

	// ref addresses the Lock's machine, and its Sender knows the lock's
	// name (lockactor.Namer): the Lock keeps no copy. It is written before
	// the Lock is returned and before its machine can call the handle
	// (handle.Bind), and never again.
	ref      lockactor.Ref
	token    atomic.Uint64
	deadline atomic.Int64 // UnixNano
	// c is the Client of a Lock that started (nil otherwise): its Observer
	// notes the Lock's grant and end, and it builds the owner field a log
	// line names (ownerField). times are the Lock's, with metrics only.
	c     *Client
	times *observe.Times

	mu   sync.Mutex // guards the fields below but held
	over bool
	// released: over by its Release, Err is ErrReleased; relAnswered:
	// Release has its answer, x.relErr (nil without x). Kept apart from x
	// so that a Lock taken and released makes none.
	released    bool
	relAnswered bool
	// held: the Lock was granted (the actor's, for obs).
	held bool
	// wslot is the slot of the Lock in its Client's context watchers
	// (ctxwatch.go) plus one, 0 when not watched; written under
	// c.watches.mu and mu, read under either.
	wslot int32
	// x is what only some Locks need, made when first needed: a Lock held
	// quietly has none (a client may hold a hundred thousand; see
	// docs/architecture.md, "Memory per hold").
	x *lockExtra
}

// lockExtra is the part of a Lock made when first needed: its end's cause
// (but ErrReleased), the answer to its Release (but nil), a composite's
// context watcher (a Client's Locks share theirs, ctxwatch.go), a LockAll's
// tokens, and an owner field the Client cannot build again from the
// request's ID (ownerField).
type lockExtra struct {
	err    error
	relErr error
	stop   func() bool // stops a composite's context watcher
	tokens *[]uint64   // a LockAll's, set before Acquired closes
	field  string
}

// extra returns l.x, made if need be. l.mu is held.
func (l *Lock) extra() *lockExtra {
	if l.x == nil {
		l.x = new(lockExtra)
	}
	return l.x
}

func newLock() *Lock {
	return &Lock{Acquired: make(chan struct{}), Lost: make(chan struct{})}
}

// endedLock returns a Lock of name that is over with err before it
// started: bad input, or a closed Client.
func endedLock(name string, err error) *Lock {
	l := newLock()
	l.ref.To = unstarted(name)
	l.end(err)
	return l
}

// unstarted is the Sender of a Lock that never reached an engine: it
// addresses nothing and keeps the Lock's name. Only such Locks pay for it
// (16 bytes, beside the lockExtra their error makes).
type unstarted string

func (unstarted) Send(lockactor.ReqID, lockactor.MsgKind, error) {}

// Name implements lockactor.Namer.
func (u unstarted) Name() string { return string(u) }

// acquired and lost are the Lock's channels as their closer sees them: the
// exported fields, receive-only, are the only copies (a second pair of
// fields would cost every Lock 16 bytes). A directional channel type has
// the bidirectional one's representation, so the conversion is sound.
func (l *Lock) acquired() chan struct{} {
	return *(*chan struct{})(unsafe.Pointer(&l.Acquired))
}

func (l *Lock) lost() chan struct{} {
	return *(*chan struct{})(unsafe.Pointer(&l.Lost))
}

// errNoLock is the answer of a Lock not made by Client.Lock.
var errNoLock = fmt.Errorf("%w: Lock not made by Client.Lock", ErrInvalidOption)

// usable reports whether l was made by newLock.
func (l *Lock) usable() bool { return l != nil && l.Lost != nil }

// errNilContext answers a blocking call given a nil context.
var errNilContext = fmt.Errorf("%w: nil context", ErrInvalidOption)

// Name returns the lock name.
func (l *Lock) Name() string {
	if l == nil {
		return ""
	}
	if n, ok := l.ref.To.(lockactor.Namer); ok {
		return n.Name()
	}
	return ""
}

// Err returns nil while the Lock is pending or held, and the cause once Lost
// is closed.
func (l *Lock) Err() error {
	if !l.usable() {
		return errNoLock
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.released:
		return ErrReleased
	case l.x == nil:
		return nil
	}
	return l.x.err
}

// Token returns the fencing token of this hold, valid once Acquired is
// closed: it increases with every grant of the lock, and nested Locks of one
// owner share their outer hold's token. Give it to the resource you protect
// and have it reject tokens lower than the highest it has seen.
func (l *Lock) Token() uint64 {
	if l == nil {
		return 0
	}
	return l.token.Load()
}

// Tokens returns the fencing tokens of this hold, valid once Acquired is
// closed: for a LockAll, one per target in the order given; for every other
// Lock, {Token()}.
func (l *Lock) Tokens() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.x != nil && l.x.tokens != nil {
		return append([]uint64(nil), (*l.x.tokens)...)
	}
	return []uint64{l.Token()}
}

// Deadline returns the current conservative validity deadline of the hold,
// in the Client's clock: the lease counted from before the request that set
// it was sent, less the drift allowance. The watchdog moves it forward. Zero
// before Acquired.
func (l *Lock) Deadline() time.Time {
	if l == nil {
		return time.Time{}
	}
	ns := l.deadline.Load()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// Wait blocks until the lock is held (nil), the Lock is over (Err()), or ctx
// ends (ctx.Err(); the Lock goes on). A nil ctx is ErrInvalidOption.
func (l *Lock) Wait(ctx context.Context) error {
	switch {
	case !l.usable():
		return errNoLock
	case ctx == nil:
		return errNilContext
	}
	if d, ok := l.ref.To.(lockactor.Driver); ok {
		d.Drive(ctx, l.Acquired, l.Lost)
	}
	select {
	case <-l.Acquired:
	case <-l.Lost:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-l.Lost:
		return l.Err()
	default:
		return nil
	}
}

// Release ends the hold, or cancels a pending Lock, and blocks until Redis
// confirmed it (nil) or ctx ended (ctx.Err(); the release goes on in the
// background). It is safe to call twice: a Release after the Lock is over
// returns ErrNotHeld (wrapping the cause it ended with) and changes nothing.
// A hold that Redis no longer shows returns ErrNotOwner. A nil ctx is
// ErrInvalidOption, and releases nothing.
//
// For a LockAll or RedLock, Release waits for the nodes that answer and at
// most CallTimeout, never a lease: it returns nil when the hold is over on
// every node that answered, and a node that is down or silent is released
// in the background (its key runs out meanwhile).
func (l *Lock) Release(ctx context.Context) error {
	switch {
	case !l.usable():
		return errNoLock
	case ctx == nil:
		return errNilContext
	}
	select {
	case <-l.Lost:
		return l.notHeld()
	default:
	}
	l.ref.Send(lockactor.MsgRelease, nil)
	if d, ok := l.ref.To.(lockactor.Driver); ok {
		d.Drive(ctx, l.Lost)
	}
	select {
	case <-l.Lost:
	case <-ctx.Done():
		return ctx.Err()
	}
	// A Release always ends the Lock; the actor answers it before it closes
	// Lost. No answer means the Lock ended before the Release was seen.
	var (
		answered bool
		err      error
	)
	l.mu.Lock()
	answered = l.relAnswered
	if l.x != nil {
		err = l.x.relErr
	}
	l.mu.Unlock()
	if !answered {
		return l.notHeld()
	}
	return err
}

func (l *Lock) notHeld() error {
	if err := l.Err(); err != nil && !errors.Is(err, ErrNotHeld) {
		return fmt.Errorf("%w: %w", ErrNotHeld, err)
	}
	return ErrNotHeld
}

// end closes Lost with err; called once, by the actor (or by Lock for a
// Lock that never started).
func (l *Lock) end(err error) {
	l.mu.Lock()
	l.over = true
	var stop func() bool
	if l.x != nil {
		stop, l.x.stop = l.x.stop, nil
	}
	watched := l.wslot != 0
	if err == ErrReleased {
		l.released = true
	} else {
		l.extra().err = err
	}
	l.mu.Unlock()
	if stop != nil {
		stop()
	}
	if watched {
		l.c.watches.leave(l)
	}
	close(l.lost())
}

// idleTimeout is the actors' linger (actor.Config.IdleTimeout); zero is its
// default. Tests shorten it (export_test.go) to make actors sleep and wake
// often; nothing else sets it.
var idleTimeout time.Duration

// handle is the actor's side of a Lock: it implements lockactor.Handle.
type handle struct{ l *Lock }

// Bind implements lockactor.Binder: the engine's Enqueue calls it before
// the request can reach its machine, on the caller's goroutine.
func (h handle) Bind(r lockactor.Ref) { h.l.ref = r }

func (h handle) Acquired(token uint64, deadline time.Time) {
	h.l.c.obs.Granted(h.l.times, h.l.Name(), h, token)
	h.l.held = true
	h.l.token.Store(token)
	h.l.deadline.Store(deadline.UnixNano())
	close(h.l.acquired())
}

func (h handle) SetDeadline(d time.Time) { h.l.deadline.Store(d.UnixNano()) }

func (h handle) ReleaseDone(err error) {
	if errors.Is(err, lockactor.ErrReleaseUnconfirmed) {
		return // interim: a Lock's Release waits for the settling answer
	}
	h.l.answerRelease(err)
}

// answerRelease keeps err as the answer to Release.
func (l *Lock) answerRelease(err error) {
	l.mu.Lock()
	l.relAnswered = true
	if err != nil {
		l.extra().relErr = err
	}
	l.mu.Unlock()
}

func (h handle) Lost(err error) {
	h.l.c.obs.Ended(h.l.times, h.l.Name(), h, h.l.token.Load(), h.l.held, err)
	h.l.end(err)
}

// RequestID is the Lock's request (lockactor.Giver): its Ref's ID, which
// Bind set before the actor could ask.
func (h handle) RequestID() lockactor.ReqID { return h.l.ref.ID }

// OwnerField is the Lock's owner field, for the Observer's log lines and a
// sleeping record (lockactor.Giver): the one the Lock keeps, or the
// Client's anonymous field of its request ID.
func (h handle) OwnerField() string {
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	if h.l.x != nil && h.l.x.field != "" {
		return h.l.x.field
	}
	return h.l.c.anonymousField(uint64(h.l.ref.ID))
}
