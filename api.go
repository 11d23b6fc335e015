package holdfast

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/redis/rueidis"
	"go.opentelemetry.io/otel/metric"

	"github.com/holdfast/holdfast/actor"
	"github.com/holdfast/holdfast/internal/clientkit"
	"github.com/holdfast/holdfast/internal/observe"
	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/pubsub"
	"github.com/holdfast/holdfast/renewal"
	"github.com/holdfast/holdfast/scripts"
	"github.com/holdfast/holdfast/timerwheel"
)

// Config configures a Client. Only Redis is required (by New; Open dials
// its own).
type Config struct {
	// Redis is the client every script call and subscription goes through.
	// The Client does not close it. Leave it nil for Open, which dials one
	// from a URL and closes it on Close.
	Redis rueidis.Client
	// Clock is the source of all time in the library. Default clock.New().
	Clock clock.Clock
	// WatchdogTimeout is the lease of a Lock without WithLease; the watchdog
	// renews it every WatchdogTimeout/3 while the Lock is held. Default 30s;
	// at least MinLease, at most MaxLease.
	WatchdogTimeout time.Duration
	// Logger receives the library's logs, protoactor's included. Default:
	// discard.
	Logger *slog.Logger
	// ClientID is a readable label at the head of every owner field this
	// Client writes (CLIENTID:INSTANCE:OWNER, see scripts.Field), for
	// operators and `holdfast status`. Default: the host name and process id,
	// HOST/PID. It must not contain ':'. It need not be unique: INSTANCE is
	// drawn at random for every Client, so Clients sharing a ClientID still
	// exclude each other.
	ClientID string
	// CallTimeout bounds each Redis call, on Clock. A call that times out
	// may still have run; the runtime repeats it to learn the outcome.
	// Default 5s. Durations here and in options may be as long as
	// math.MaxInt64, which means "very long", never "at once".
	CallTimeout time.Duration
	// HandoffLimit and HandoffWindow bound local handoffs. When a Lock is
	// released while another Lock of this Client waits for the same name,
	// the release and the waiter's grant run as one Redis call, which wakes
	// no other process. Up to HandoffLimit handoffs run in a row, within
	// HandoffWindow of the name's last grant from Redis; then the lock goes
	// back to Redis and this Client's waiters compete for it with other
	// processes' waiters on equal terms. Defaults 100 and 10ms; a negative
	// HandoffLimit turns local handoff off.
	HandoffLimit  int
	HandoffWindow time.Duration
	// SyncReplicas, when positive, makes every script call but a release
	// (grants, renewals, fair-queue places and keep-alives) WAIT for this many
	// replicas to acknowledge it, the script and the WAIT sent together on one
	// connection; Acquired closes only after the grant's acks. A fresh grant
	// with too few acks within SyncTimeout is undone and its Lock ends with
	// ErrReplicaSync; a renewal with too few acks counts as failed (the hold
	// is Lost at its deadline if none syncs); other calls short of acks count
	// as they are. It keeps a hold through a failover to an acknowledging
	// replica; it also turns local handoff off. Default 0: no WAIT (a
	// failover can lose a hold's key; the holder then learns it through
	// Lost). See README "Deployments".
	SyncReplicas int
	// SyncTimeout bounds each WAIT of SyncReplicas. Default 1s.
	SyncTimeout time.Duration
	// WaiterTimeout bounds how long a dead process keeps its places in fair
	// lock queues (FairLock): live waiters renew their places every
	// WaiterTimeout/3, so a crashed process's waiters all leave within
	// WaiterTimeout, and a grant its waiter does not confirm within
	// WaiterTimeout passes to the next waiter. Default 5s; at least
	// MinLease.
	WaiterTimeout time.Duration
	// MeterProvider receives the Client's metrics (see README, Metrics):
	// acquisitions by outcome, wait and hold times, renewals, lost holds,
	// held and waiting Locks, Redis call latency. Default: none recorded.
	MeterProvider metric.MeterProvider
}

// DefaultWatchdogTimeout is Config.WatchdogTimeout's default.
const DefaultWatchdogTimeout = 30 * time.Second

const (
	defaultCallTimeout = 5 * time.Second
	defaultSyncTimeout = time.Second
	wheelTick          = 10 * time.Millisecond
	wheelSlots         = 512
	// deadlineSlack is how much before a hold's validity deadline its
	// deadline timer is set, so that Lost closes before the deadline even
	// when the timer is late: one wheel tick (a timer fires up to a tick
	// after its time by design) plus the scheduling delay of the wheel's
	// goroutine and the actor. BenchmarkLatenessUnderLoad (timerwheel)
	// measured on 2 shared CPUs: p99.9 20ms past the deadline with the CPUs
	// busy but not saturated, and 100-200ms with spinning goroutines
	// outnumbering the CPUs. Two ticks cover the first; no slack a 50ms
	// lease can afford covers the second, which is why a holder checks
	// Deadline() before acting and the resource checks fencing tokens (see
	// README, Safety).
	deadlineSlack = 2 * wheelTick
)

// Validate reports the first problem with c, wrapped in ErrInvalidOption.
func (c *Config) Validate() error {
	if c.Redis == nil {
		return fmt.Errorf("%w: Config.Redis is required", ErrInvalidOption)
	}
	return c.validateOptions()
}

func (c *Config) validateOptions() error {
	switch {
	case c.WatchdogTimeout != 0 && checkLease("WatchdogTimeout", c.WatchdogTimeout) != nil:
		return checkLease("WatchdogTimeout", c.WatchdogTimeout)
	case c.WaiterTimeout != 0 && checkLease("WaiterTimeout", c.WaiterTimeout) != nil:
		return checkLease("WaiterTimeout", c.WaiterTimeout)
	case c.CallTimeout < 0:
		return fmt.Errorf("%w: negative CallTimeout", ErrInvalidOption)
	case c.HandoffWindow < 0:
		return fmt.Errorf("%w: negative HandoffWindow", ErrInvalidOption)
	case c.SyncReplicas < 0:
		return fmt.Errorf("%w: negative SyncReplicas", ErrInvalidOption)
	case c.SyncTimeout < 0:
		return fmt.Errorf("%w: negative SyncTimeout", ErrInvalidOption)
	case strings.Contains(c.ClientID, ":"):
		return fmt.Errorf("%w: ClientID %q contains ':'", ErrInvalidOption, c.ClientID)
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Clock == nil {
		c.Clock = clock.New()
	}
	if c.WatchdogTimeout == 0 {
		c.WatchdogTimeout = DefaultWatchdogTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ClientID == "" {
		c.ClientID = defaultClientID()
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = defaultCallTimeout
	}
	if c.WaiterTimeout == 0 {
		c.WaiterTimeout = DefaultWaiterTimeout
	}
	if c.SyncTimeout == 0 {
		c.SyncTimeout = defaultSyncTimeout
	}
	if c.SyncReplicas > 0 {
		// A handoff's grant is not synced (actor.Synced).
		c.HandoffLimit = -1
	}
}

// defaultClientID is HOST/PID, with any ':' of the host name replaced.
func defaultClientID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return strings.ReplaceAll(host, ":", "_") + "/" + strconv.Itoa(os.Getpid())
}

// newInstance draws the random part of a Client's owner fields: 48 bits,
// so that Clients sharing a ClientID do not collide.
func newInstance() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// DefaultWaiterTimeout is Config.WaiterTimeout's default.
const DefaultWaiterTimeout = lockactor.DefaultWaiterTimeout

// machine is the lock state machines' configuration.
func (c *Config) machine() lockactor.Config {
	return lockactor.Config{Slack: deadlineSlack, HandoffLimit: c.HandoffLimit, HandoffWindow: c.HandoffWindow,
		WaiterTimeout: c.WaiterTimeout}
}

// Client hands out Locks on one Redis deployment. It runs one actor per lock
// name in use, one timer wheel, one watchdog and one pub/sub connection. A
// Client is safe for concurrent use; Close it when done.
type Client struct {
	cfg      Config
	instance string // the random part of this Client's owner fields
	eng      clientkit.Engine
	obs      *observe.Observer
	closers  []func() // run after the engine closes, in order
	nextID   atomic.Uint64

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
	if cfg.SyncReplicas > 0 {
		base = actor.NewSynced(rue, cfg.SyncReplicas, cfg.SyncTimeout)
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
	}
	var callMany actor.CallMany
	if cfg.SyncReplicas == 0 {
		// Without WAIT, the calls of many slots share per-node pipelines,
		// and the actors' calls that queue up go out together.
		rcfg.ExecMulti = redis.RenewMulti(rue.RenewMulti)
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
	return &Client{cfg: cfg, instance: newInstance(), eng: sys, obs: obs, closers: []func(){cancelRenewals, renew.Close, subs.Close, wheel.Stop}}, nil
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
	l := newLock(name)
	o := applyOptions(opts)
	if !c.usable() {
		l.end(errNoClient)
		return l
	}
	if err := c.check(ctx, name, o); err != nil {
		l.end(err)
		return l
	}
	owner, ok, _ := ownerFrom(ctx)
	id := c.nextID.Add(1)
	var field string
	if ok {
		field = scripts.Field(c.cfg.ClientID, c.instance, owner)
	} else {
		field = anonymousField(c.cfg.ClientID, c.instance, id)
	}
	req := lockactor.Request{
		ID:       lockactor.ReqID(id),
		Field:    field,
		Lease:    o.lease,
		Watchdog: o.lease == 0,
		Wait:     o.wait,
		Kind:     kind,
		Mode:     mode,
	}
	if req.Watchdog {
		req.Lease = c.cfg.WatchdogTimeout
	}
	if kind.HoldField != nil {
		req.Field = kind.HoldField(req.Field, mode)
	}
	c.obs.Start(&l.obs, name, req.Field)
	ref, err := c.eng.Enqueue(name, req, handle{l})
	if err != nil {
		handle{l}.Lost(err)
		return l
	}
	l.ref = ref
	if ctx.Done() == nil {
		return l // a context that never ends needs no watching
	}
	// The watcher captures l rather than ref (a smaller closure: a client
	// may hold a hundred thousand Locks); l.ref is not written again.
	stop := context.AfterFunc(ctx, func() {
		l.ref.Send(lockactor.MsgCancel, fmt.Errorf("holdfast: lock context ended: %w", ctx.Err()))
	})
	l.mu.Lock()
	if l.over {
		l.mu.Unlock()
		stop()
	} else {
		l.stop = stop
		l.mu.Unlock()
	}
	return l
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

	name     string
	acquired chan struct{}
	lost     chan struct{}
	ref      lockactor.Ref
	token    atomic.Uint64
	deadline atomic.Int64 // UnixNano
	obs      observe.Hold // touched by Lock, then by the actor only

	mu          sync.Mutex // guards the fields below
	err         error
	relErr      error // the answer to Release, once relAnswered
	relAnswered bool
	over        bool
	stop        func() bool // stops the context watcher
	// tokens are a LockAll's tokens, set before Acquired closes; a pointer
	// rather than a slice keeps a Lock within 192 bytes (its size class).
	tokens *[]uint64
}

func newLock(name string) *Lock {
	l := &Lock{
		name:     name,
		acquired: make(chan struct{}),
		lost:     make(chan struct{}),
	}
	l.Acquired, l.Lost = l.acquired, l.lost
	return l
}

// errNoLock is the answer of a Lock not made by Client.Lock.
var errNoLock = fmt.Errorf("%w: Lock not made by Client.Lock", ErrInvalidOption)

// usable reports whether l was made by newLock.
func (l *Lock) usable() bool { return l != nil && l.lost != nil }

// errNilContext answers a blocking call given a nil context.
var errNilContext = fmt.Errorf("%w: nil context", ErrInvalidOption)

// Name returns the lock name.
func (l *Lock) Name() string {
	if l == nil {
		return ""
	}
	return l.name
}

// Err returns nil while the Lock is pending or held, and the cause once Lost
// is closed.
func (l *Lock) Err() error {
	if !l.usable() {
		return errNoLock
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
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
	if l.tokens != nil {
		return append([]uint64(nil), (*l.tokens)...)
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
		d.Drive(ctx, l.acquired, l.lost)
	}
	select {
	case <-l.acquired:
	case <-l.lost:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-l.lost:
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
func (l *Lock) Release(ctx context.Context) error {
	switch {
	case !l.usable():
		return errNoLock
	case ctx == nil:
		return errNilContext
	}
	select {
	case <-l.lost:
		return l.notHeld()
	default:
	}
	l.ref.Send(lockactor.MsgRelease, nil)
	if d, ok := l.ref.To.(lockactor.Driver); ok {
		d.Drive(ctx, l.lost)
	}
	select {
	case <-l.lost:
	case <-ctx.Done():
		return ctx.Err()
	}
	// A Release always ends the Lock; the actor answers it before it closes
	// Lost. No answer means the Lock ended before the Release was seen.
	l.mu.Lock()
	answered, err := l.relAnswered, l.relErr
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
	l.err, l.over = err, true
	stop := l.stop
	l.stop = nil
	l.mu.Unlock()
	if stop != nil {
		stop()
	}
	close(l.lost)
}

// idleTimeout is the actors' linger (actor.Config.IdleTimeout); zero is its
// default. Tests shorten it (export_test.go) to make actors sleep and wake
// often; nothing else sets it.
var idleTimeout time.Duration

// handle is the actor's side of a Lock: it implements lockactor.Handle.
type handle struct{ l *Lock }

func (h handle) Acquired(token uint64, deadline time.Time) {
	h.l.obs.Granted(h.l.name, token)
	h.l.token.Store(token)
	h.l.deadline.Store(deadline.UnixNano())
	close(h.l.acquired)
}

func (h handle) SetDeadline(d time.Time) { h.l.deadline.Store(d.UnixNano()) }

func (h handle) ReleaseDone(err error) {
	h.l.mu.Lock()
	h.l.relErr, h.l.relAnswered = err, true
	h.l.mu.Unlock()
}

func (h handle) Lost(err error) {
	h.l.obs.Ended(h.l.name, h.l.token.Load(), err)
	h.l.end(err)
}
