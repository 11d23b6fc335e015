package redissontest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// ErrClosed is returned by operations on, or waits in, a closed Client.
var ErrClosed = errors.New("redissontest: client closed")

// IllegalMonitorStateError is Redisson's IllegalMonitorStateException from
// unlock: the lock is not held by this ID:THREAD (the unlock script
// answered nil).
type IllegalMonitorStateError struct {
	ID     string
	Thread int64
}

func (e *IllegalMonitorStateError) Error() string {
	return fmt.Sprintf("attempt to unlock lock, not locked by current thread by node id: %s thread-id: %d", e.ID, e.Thread)
}

// Option configures a Client.
type Option func(*Client)

// WithWatchdogTimeout sets Redisson's Config.lockWatchdogTimeout (default
// 30 s): the lease of a lock taken without a lease, and of each renewal,
// which runs every timeout/3.
func WithWatchdogTimeout(d time.Duration) Option {
	return func(c *Client) { c.watchdog = d }
}

// WithShardedPubSub makes the Client publish with SPUBLISH and subscribe
// with SSUBSCRIBE, as Redisson does against a Redis Cluster that supports
// sharded pub/sub (ClusterServersConfig.shardedSubscriptionMode AUTO). The
// default is PUBLISH/SUBSCRIBE, as Redisson uses on a single server.
func WithShardedPubSub() Option {
	return func(c *Client) { c.sharded = true }
}

// WithUnlockLatchTimeout sets the PX, in ms, of the unlock latch (default
// DefaultUnlockLatchTimeoutMs).
func WithUnlockLatchTimeout(ms int64) Option {
	return func(c *Client) { c.latchMs = ms }
}

// Client is one Redisson instance (one connection manager, one UUID) as far
// as the lock protocol goes. Threads are int64s the caller passes.
type Client struct {
	rdb      rueidis.Client
	id       string
	watchdog time.Duration
	sharded  bool
	latchMs  int64
	fairWait int64 // Config.fairLockWaitTimeout, ms

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	subMu sync.Mutex // serializes subscribe/unsubscribe, like Redisson's per-channel semaphore
	subs  map[string]*subscription

	mu     sync.Mutex
	leases map[string]int64 // kind|name -> internalLockLeaseTime of that lock object

	locks *renewalTask // renewal.LockTask
	reads *renewalTask // renewal.ReadLockTask

	wg sync.WaitGroup // renewal chains and subscriptions
}

// New makes a Client speaking as the Redisson instance whose connection
// manager id (a UUID string) is id.
func New(rdb rueidis.Client, id string, opts ...Option) *Client {
	c := &Client{
		rdb:      rdb,
		id:       id,
		watchdog: DefaultWatchdogTimeout,
		latchMs:  DefaultUnlockLatchTimeoutMs,
		fairWait: DefaultFairLockWaitTimeout.Milliseconds(),
		subs:     map[string]*subscription{},
		leases:   map[string]int64{},
	}
	for _, o := range opts {
		o(c)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.locks = &renewalTask{c: c, entries: map[string]*renewalEntry{}}
	c.reads = &renewalTask{c: c, read: true, entries: map[string]*renewalEntry{}}
	return c
}

// ID is the Client's Redisson id.
func (c *Client) ID() string { return c.id }

// WatchdogTimeout is the Client's lockWatchdogTimeout.
func (c *Client) WatchdogTimeout() time.Duration { return c.watchdog }

// Close stops the watchdogs and every subscription and waits for their
// goroutines; waits in progress return ErrClosed. Locks held stay in Redis
// until their leases end, as when a Redisson instance shuts down. It does
// not close the rueidis client.
func (c *Client) Close() {
	c.cancel()
	c.locks.stopAll()
	c.reads.stopAll()
	c.subMu.Lock()
	subs := c.subs
	c.subs = map[string]*subscription{}
	c.subMu.Unlock()
	for _, s := range subs {
		s.stop()
	}
	c.wg.Wait()
}

func (c *Client) closed() bool { return c.ctx.Err() != nil }

func (c *Client) publishCommand() string {
	if c.sharded {
		return "SPUBLISH"
	}
	return "PUBLISH"
}

func (c *Client) watchdogMs() int64 { return c.watchdog.Milliseconds() }

// internalLease is the lock object's internalLockLeaseTime: the watchdog
// timeout until the object is acquired with a lease, then that lease until
// an unlock that released or failed (RedissonLock.cancelExpirationRenewal).
func (c *Client) internalLease(kind, name string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.leases[kind+"|"+name]; ok {
		return l
	}
	return c.watchdogMs()
}

func (c *Client) setInternalLease(kind, name string, ms int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ms == c.watchdogMs() {
		delete(c.leases, kind+"|"+name)
		return
	}
	c.leases[kind+"|"+name] = ms
}

// requestID is ServiceManager.generateId: 16 random bytes in hex.
func requestID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// semaphore is RedissonLockEntry's latch, a java.util.concurrent.Semaphore
// with no initial permits: release adds a permit (or hands it to a waiter),
// releaseWaiting releases as many permits as there are waiters right now.
type semaphore struct {
	mu      sync.Mutex
	permits int
	waiters []chan struct{}
}

func (s *semaphore) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.waiters) > 0 {
		w := s.waiters[0]
		s.waiters = s.waiters[1:]
		w <- struct{}{}
		return
	}
	s.permits++
}

func (s *semaphore) releaseWaiting() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.waiters {
		w <- struct{}{}
	}
	s.waiters = nil
}

// acquire takes a permit, waiting at most d (forever when d < 0). It
// reports whether it got one; the error is the context's or ErrClosed.
func (s *semaphore) acquire(ctx, closed context.Context, d time.Duration) (bool, error) {
	s.mu.Lock()
	if s.permits > 0 {
		s.permits--
		s.mu.Unlock()
		return true, nil
	}
	if d == 0 {
		s.mu.Unlock()
		return false, nil
	}
	w := make(chan struct{}, 1)
	s.waiters = append(s.waiters, w)
	s.mu.Unlock()

	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	var err error
	select {
	case <-w:
		return true, nil
	case <-timeout:
	case <-ctx.Done():
		err = ctx.Err()
	case <-closed.Done():
		err = ErrClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.waiters {
		if x == w {
			s.waiters = append(s.waiters[:i:i], s.waiters[i+1:]...)
			return false, err
		}
	}
	// A release handed us the permit as we gave up: keep it.
	<-w
	return true, err
}

// subscription is one channel's RedissonLockEntry in LockPubSub: shared by
// every waiting thread of the Client, counted, unsubscribed when the last
// one leaves.
type subscription struct {
	channel string
	refs    int
	latch   semaphore

	ready    chan struct{} // closed on the subscribe confirmation or failure
	err      error         // set before ready closes
	once     sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
	stopOnce sync.Once
	dc       rueidis.DedicatedClient
}

// onMessage is LockPubSub.onMessage.
func (s *subscription) onMessage(m rueidis.PubSubMessage) {
	if m.Channel != s.channel {
		return
	}
	if strings.HasPrefix(s.channel, SemChannelPrefix+":") {
		s.semMessage(m.Message)
		return
	}
	switch m.Message {
	case "0": // UNLOCK_MESSAGE
		s.latch.release()
	case "1": // READ_UNLOCK_MESSAGE
		s.latch.releaseWaiting()
	}
}

func (s *subscription) stop() {
	s.stopOnce.Do(func() {
		s.cancel()
		s.dc.Close()
		<-s.done
	})
}

// subscribe is LockPubSub.subscribe: it returns once the channel's
// subscription is confirmed by Redis.
func (c *Client) subscribe(ctx context.Context, channel string) (*subscription, error) {
	c.subMu.Lock()
	if c.closed() {
		c.subMu.Unlock()
		return nil, ErrClosed
	}
	s := c.subs[channel]
	if s != nil {
		s.refs++
	} else {
		s = c.startSubscription(channel)
		c.subs[channel] = s
	}
	c.subMu.Unlock()

	select {
	case <-s.ready:
		if s.err == nil {
			return s, nil
		}
		c.unsubscribe(s)
		return nil, fmt.Errorf("redissontest: subscribing to %s: %w", channel, s.err)
	case <-ctx.Done():
		c.unsubscribe(s)
		return nil, ctx.Err()
	case <-c.ctx.Done():
		return nil, ErrClosed
	}
}

func (c *Client) startSubscription(channel string) *subscription {
	dc, _ := c.rdb.Dedicate()
	ctx, cancel := context.WithCancel(c.ctx)
	s := &subscription{channel: channel, refs: 1, ready: make(chan struct{}), done: make(chan struct{}), cancel: cancel, dc: dc}
	cmd := dc.B().Subscribe().Channel(channel).Build()
	if c.sharded {
		cmd = dc.B().Ssubscribe().Channel(channel).Build()
	}
	hooked := rueidis.WithOnSubscriptionHook(ctx, func(sub rueidis.PubSubSubscription) {
		if sub.Channel == channel && (sub.Kind == "subscribe" || sub.Kind == "ssubscribe") {
			s.once.Do(func() { close(s.ready) })
		}
	})
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(s.done)
		err := dc.Receive(hooked, cmd, s.onMessage)
		if err == nil {
			err = errors.New("subscription ended")
		}
		s.once.Do(func() { s.err = err; close(s.ready) })
	}()
	return s
}

// unsubscribe is LockPubSub.unsubscribe.
func (c *Client) unsubscribe(s *subscription) {
	c.subMu.Lock()
	s.refs--
	last := s.refs == 0
	if last && c.subs[s.channel] == s {
		delete(c.subs, s.channel)
	}
	if last {
		// Stop under subMu, as Redisson holds the channel's semaphore until
		// the UNSUBSCRIBE completes.
		s.stop()
	}
	c.subMu.Unlock()
}
