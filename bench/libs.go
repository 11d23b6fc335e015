package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/holdfast/holdfast"
)

// Library names, as they appear in the table and the JSON.
const (
	libHoldfast = "holdfast"
	// libHoldfastRedisson is holdfast with Config.Layout = LayoutRedisson
	// (Redisson's RLock keys): not in allLibs, ask for it with -libs.
	libHoldfastRedisson = "holdfast-redisson"
	libRedsync          = "redsync"
	libRedislock        = "redislock"
	libRueidislock      = "rueidislock"
	refBenchmark        = "redis-benchmark"
	refAfterFunc        = "time.AfterFunc"
	refPing             = "PING loop" // a plain Go loop of PINGs on one connection
	// refSerialHandoff is handoff.lua called back to back by one goroutine
	// on a bare client: the hot lock's floor (serialHandoffRound).
	refSerialHandoff = "handoff.lua serially"
	// refBareScripts is holdfast's acquire and release scripts called by 64
	// goroutines on a bare rueidis client: the uncontended cycle's floor
	// under holdfast's scripts (the holdfast shape of the layouts scenario).
	refBareScripts = "scripts on a bare client"
)

var allLibs = []string{libHoldfast, libRedsync, libRedislock, libRueidislock}

// knownLibs are the libraries -libs accepts.
var knownLibs = append([]string{libHoldfastRedisson}, allLibs...)

// peerLease is the lease of redsync's and redislock's locks, which have no
// watchdog: long enough that no hold in any scenario runs out, the same as
// holdfast's default WatchdogTimeout.
const peerLease = 30 * time.Second

// held is one acquired lock.
type held interface {
	Release(ctx context.Context) error
}

// locker is one client of one library: its own connections to Redis.
type locker interface {
	// Lock blocks until name is held or ctx ends.
	Lock(ctx context.Context, name string) (held, error)
	Close()
}

// openOpts are the settings a scenario may change.
type openOpts struct {
	watchdog time.Duration // holdfast's WatchdogTimeout; rueidislock's KeyValidity
	extend   time.Duration // rueidislock's ExtendInterval (0: its default)
	fair     bool          // holdfast: FairLock instead of Lock
	// extendLoop: redsync's locks last watchdog, and each held lock has a
	// goroutine calling Extend every extend, as a redsync user keeps a
	// lock held as long as needed (redsync has no watchdog of its own).
	extendLoop bool
}

// addrs are the addresses clients are given: the cluster's nodes while
// e.cl is set, else the one server.
func (e *env) addrs() []string {
	if e.cl != nil {
		return e.cl.addrs
	}
	return []string{e.srv.addr}
}

// open makes one client of lib whose connections count into ctr.
func (e *env) open(lib string, ctr *cmdCounter, o openOpts) (locker, error) {
	switch lib {
	case libHoldfast, libHoldfastRedisson:
		rdb, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress: e.addrs(),
			DialCtxFn:   ctr.rueidisDialer(),
		})
		if err != nil {
			return nil, err
		}
		if e.cl != nil && rdb.Mode() != rueidis.ClientModeCluster {
			rdb.Close()
			return nil, fmt.Errorf("bench: rueidis client on the cluster is in mode %v, not cluster", rdb.Mode())
		}
		layout := holdfast.LayoutHoldfast
		if lib == libHoldfastRedisson {
			layout = holdfast.LayoutRedisson
		}
		c, err := holdfast.New(holdfast.Config{Redis: rdb, WatchdogTimeout: o.watchdog, Layout: layout})
		if err != nil {
			rdb.Close()
			return nil, err
		}
		return &hfLocker{c: c, rdb: rdb, fair: o.fair}, nil
	case libRedsync:
		if e.cl != nil || o.extendLoop {
			return e.rsExtendLocker(ctr, o), nil
		}
		return newRsLocker(e.goredis(ctr), nil, e.retryDelay), nil
	case libRedislock:
		if e.cl != nil {
			return nil, errors.New("bench: redislock is not run on a cluster")
		}
		return newRlLocker(e.goredis(ctr), nil, e.retryDelay), nil
	case libRueidislock:
		l, err := rueidislock.NewLocker(rueidislock.LockerOption{
			ClientOption: rueidis.ClientOption{
				InitAddress: e.addrs(),
				DialCtxFn:   ctr.rueidisDialer(),
			},
			KeyMajority:    1,
			NoLoopTracking: true, // the README's advice for Redis >= 7.0.5
			KeyValidity:    o.watchdog,
			ExtendInterval: o.extend,
		})
		if err != nil {
			return nil, err
		}
		return &ruLocker{l: l}, nil
	}
	return nil, errors.New("bench: unknown library " + lib)
}

func (e *env) goredis(ctr *cmdCounter) *goredis.Client {
	return goredis.NewClient(&goredis.Options{
		Addr:   e.srv.addr,
		Dialer: ctr.goredisDialer(),
	})
}

// holdfast: Lock (or FairLock) + Wait, Release.
type hfLocker struct {
	c    *holdfast.Client
	rdb  rueidis.Client
	fair bool
}

func (h *hfLocker) Lock(ctx context.Context, name string) (held, error) {
	lock := h.c.Lock
	if h.fair {
		lock = h.c.FairLock
	}
	l := lock(ctx, name)
	if err := l.Wait(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// Close closes the Client, and its rueidis client unless it is shared
// (rdb nil): holdfast never closes the client it was given.
func (h *hfLocker) Close() {
	h.c.Close()
	if h.rdb != nil {
		h.rdb.Close()
	}
}

// redsync on one node, go-redis v9: a Mutex per Lock call as its README
// shows, retrying every retryDelay until ctx ends. The options are made
// once, as a program locking in a loop would: allocations per cycle are then
// redsync's own.
type rsLocker struct {
	rdb  goredis.UniversalClient // nil when shared with other lockers
	rs   *redsync.Redsync
	opts []redsync.Option
	// extend, if not 0, is the period of the Extend loop each held lock
	// gets (openOpts.extendLoop).
	extend time.Duration
}

func newRsLocker(rdb, shared *goredis.Client, delay time.Duration) *rsLocker {
	if shared != nil {
		rdb = shared
	}
	l := &rsLocker{rs: redsync.New(rsgoredis.NewPool(rdb)), opts: []redsync.Option{
		redsync.WithExpiry(peerLease),
		redsync.WithTries(math.MaxInt32),
		redsync.WithRetryDelay(delay),
	}}
	if shared == nil {
		l.rdb = rdb
	}
	return l
}

type rsHeld struct{ m *redsync.Mutex }

func (h rsHeld) Release(ctx context.Context) error {
	_, err := h.m.UnlockContext(ctx)
	return err
}

func (r *rsLocker) Lock(ctx context.Context, name string) (held, error) {
	m := r.rs.NewMutex(name, r.opts...)
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	if r.extend > 0 {
		return startExtending(ctx, m, r.extend), nil
	}
	return rsHeld{m}, nil
}

// rsExtendLocker is redsync with an Extend loop per held lock, on the one
// server or, while e.cl is set, on the cluster (go-redis's ClusterClient:
// a lock is one key, so one slot).
func (e *env) rsExtendLocker(ctr *cmdCounter, o openOpts) *rsLocker {
	var rdb goredis.UniversalClient
	if e.cl != nil {
		rdb = goredis.NewClusterClient(&goredis.ClusterOptions{
			Addrs:  e.cl.addrs,
			Dialer: ctr.goredisDialer(),
		})
	} else {
		rdb = e.goredis(ctr)
	}
	expiry := peerLease
	if o.extendLoop && o.watchdog > 0 {
		expiry = o.watchdog
	}
	l := &rsLocker{rdb: rdb, rs: redsync.New(rsgoredis.NewPool(rdb)), opts: []redsync.Option{
		redsync.WithExpiry(expiry),
		redsync.WithTries(math.MaxInt32),
		redsync.WithRetryDelay(e.retryDelay),
	}}
	if o.extendLoop {
		l.extend = o.extend
		if l.extend <= 0 {
			l.extend = expiry / 3
		}
	}
	return l
}

// rsExtHeld is a redsync lock kept by its own goroutine, which calls
// Extend every period until the lock is released, its context ends, or an
// Extend fails (then the lock is lost: lostCh closes).
type rsExtHeld struct {
	m      *redsync.Mutex
	stop   chan struct{}
	done   chan struct{}
	lostCh chan struct{}
}

func startExtending(ctx context.Context, m *redsync.Mutex, period time.Duration) *rsExtHeld {
	h := &rsExtHeld{m: m, stop: make(chan struct{}), done: make(chan struct{}), lostCh: make(chan struct{})}
	go func() {
		defer close(h.done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-ctx.Done():
				close(h.lostCh)
				return
			case <-t.C:
				if ok, err := m.ExtendContext(ctx); !ok || err != nil {
					close(h.lostCh)
					return
				}
			}
		}
	}()
	return h
}

// Release stops the Extend loop and unlocks.
func (h *rsExtHeld) Release(ctx context.Context) error {
	close(h.stop)
	<-h.done
	_, err := h.m.UnlockContext(ctx)
	return err
}

func (r *rsLocker) Close() {
	if r.rdb != nil {
		r.rdb.Close()
	}
}

// redislock: Obtain with a linear retry every retryDelay until ctx ends.
// The options (the retry strategy is stateless) are made once.
type rlLocker struct {
	rdb  *goredis.Client // nil when shared with other lockers
	c    *redislock.Client
	opts *redislock.Options
}

func newRlLocker(rdb, shared *goredis.Client, delay time.Duration) *rlLocker {
	if shared != nil {
		rdb = shared
	}
	l := &rlLocker{c: redislock.New(rdb), opts: &redislock.Options{RetryStrategy: redislock.LinearBackoff(delay)}}
	if shared == nil {
		l.rdb = rdb
	}
	return l
}

func (r *rlLocker) Lock(ctx context.Context, name string) (held, error) {
	l, err := r.c.Obtain(ctx, name, peerLease, r.opts)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (r *rlLocker) Close() {
	if r.rdb != nil {
		r.rdb.Close()
	}
}

// rueidislock: WithContext waits for client-side-caching invalidations, so
// it has no retry interval to tune; cancel releases.
type ruLocker struct{ l rueidislock.Locker }

// ruHeld is a held rueidislock lock. Its records are pooled so that the
// harness allocates nothing per cycle (a two-word value in an interface
// would cost one allocation): allocs_per_cycle is then rueidislock's own.
type ruHeld struct {
	ctx    context.Context
	cancel context.CancelFunc
}

var ruHelds = sync.Pool{New: func() any { return new(ruHeld) }}

// Release cancels the lock's context, which releases it, and gives the
// record back; the harness releases each hold once.
func (h *ruHeld) Release(context.Context) error {
	cancel := h.cancel
	*h = ruHeld{}
	ruHelds.Put(h)
	cancel()
	return nil
}

func (r *ruLocker) Lock(ctx context.Context, name string) (held, error) {
	lctx, cancel, err := r.l.WithContext(ctx, name)
	if err != nil {
		return nil, err
	}
	h := ruHelds.Get().(*ruHeld)
	h.ctx, h.cancel = lctx, cancel
	return h, nil
}

func (r *ruLocker) Close() { r.l.Close() }

// defaultRetryDelay is how often redsync and redislock retry a held lock:
// the shortest interval redislock's documentation recommends ("not less than
// 16ms"), well under redsync's default of 50-250 ms. Shorter intervals do
// not help them: on a hot lock they lower handoffs/s (more failed attempts
// compete with the holder for the server), see README.md.
const defaultRetryDelay = 16 * time.Millisecond
