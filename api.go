package holdfast

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast/holdfast/actor"
	"github.com/holdfast/holdfast/internal/clientkit"
	"github.com/holdfast/holdfast/internal/observe"
	"github.com/holdfast/holdfast/pubsub"
	"github.com/holdfast/holdfast/renewal"
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

// idleTimeout is the actors' linger (actor.Config.IdleTimeout); zero is its
// default. Tests shorten it (export_test.go) to make actors sleep and wake
// often; nothing else sets it.
var idleTimeout time.Duration
