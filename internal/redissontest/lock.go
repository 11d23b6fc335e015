package redissontest

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// kind is one Redisson lock class: its channel, scripts and watchdog.
type kind struct {
	object  string // names the per-object internalLockLeaseTime
	channel func(name string) string
	// try runs the class's acquire script once with lease ms: a grant, or
	// the PTTL the script answered.
	try func(ctx context.Context, c *Client, name string, thread, lease int64) (granted bool, ttl, token int64, err error)
	// unlock runs the class's unlock script with the given latch key:
	// held false for a nil answer, else released for 1.
	unlock func(ctx context.Context, c *Client, name string, thread int64, latch string) (held, released bool, err error)
	// renew is the class's scheduleExpirationRenewal.
	renew func(c *Client, name string, thread int64)
	// cancel is the class's cancelExpirationRenewal; thread nil for all.
	cancel func(c *Client, name string, thread *int64)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// evalTTL runs an acquire script answering nil (granted) or a PTTL.
func (c *Client) evalTTL(ctx context.Context, s *rueidis.Lua, keys []string, args ...string) (bool, int64, int64, error) {
	ttl, err := s.Exec(ctx, c.rdb, keys, args).AsInt64()
	if rueidis.IsRedisNil(err) {
		return true, 0, 0, nil
	}
	if err != nil {
		return false, 0, 0, err
	}
	return false, ttl, 0, nil
}

// evalUnlock runs an unlock script answering nil, 0 or 1.
func (c *Client) evalUnlock(ctx context.Context, s *rueidis.Lua, keys []string, args ...string) (bool, bool, error) {
	n, err := s.Exec(ctx, c.rdb, keys, args).AsInt64()
	if rueidis.IsRedisNil(err) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	return true, n == 1, nil
}

func plainUnlock(ctx context.Context, c *Client, name string, thread int64, latch string) (bool, bool, error) {
	return c.evalUnlock(ctx, unlockLua, []string{name, LockChannel(name), latch},
		itoa(UnlockMessage), itoa(c.internalLease("lock", name)), LockField(c.id, thread),
		c.publishCommand(), itoa(c.latchMs))
}

var plainKind = &kind{
	object:  "lock",
	channel: LockChannel,
	try: func(ctx context.Context, c *Client, name string, thread, lease int64) (bool, int64, int64, error) {
		return c.evalTTL(ctx, acquireLua, []string{name}, itoa(lease), LockField(c.id, thread))
	},
	unlock: plainUnlock,
	renew:  func(c *Client, name string, thread int64) { c.locks.add(name, thread, LockField(c.id, thread), "") },
	cancel: func(c *Client, name string, thread *int64) { c.locks.cancel(name, thread) },
}

// fencedPlainKind is an RFencedLock's lock()/tryLock(): a grant INCRs the
// token counter but does not answer the token.
var fencedPlainKind = &kind{
	object:  "lock",
	channel: LockChannel,
	try: func(ctx context.Context, c *Client, name string, thread, lease int64) (bool, int64, int64, error) {
		return c.evalTTL(ctx, fencedAcquireLua, []string{name, TokenKey(name)}, itoa(lease), LockField(c.id, thread))
	},
	unlock: plainUnlock,
	renew:  plainKind.renew,
	cancel: plainKind.cancel,
}

// fencedKind is an RFencedLock's lockAndGetToken/tryLockAndGetToken.
var fencedKind = &kind{
	object:  "lock",
	channel: LockChannel,
	try: func(ctx context.Context, c *Client, name string, thread, lease int64) (bool, int64, int64, error) {
		res, err := fencedTokenLua.Exec(ctx, c.rdb, []string{name, TokenKey(name)},
			[]string{itoa(lease), LockField(c.id, thread)}).AsIntSlice()
		if err != nil {
			return false, 0, 0, err
		}
		if len(res) != 2 {
			return false, 0, 0, errors.New("redissontest: fenced acquire answered " + strconv.Itoa(len(res)) + " values")
		}
		if res[0] == -1 {
			return true, 0, res[1], nil
		}
		return false, res[0], 0, nil
	},
	unlock: plainUnlock,
	renew:  plainKind.renew,
	cancel: plainKind.cancel,
}

// tryAcquire is RedissonLock.tryAcquireAsync: a lease > 0 is used as given
// and becomes the object's internalLockLeaseTime; otherwise the script gets
// internalLockLeaseTime and a grant schedules the watchdog.
func (c *Client) tryAcquire(ctx context.Context, k *kind, name string, thread, leaseMs int64) (bool, int64, int64, error) {
	lease := leaseMs
	if leaseMs <= 0 {
		lease = c.internalLease(k.object, name)
	}
	granted, ttl, token, err := k.try(ctx, c, name, thread, lease)
	if err != nil || !granted {
		return false, ttl, 0, err
	}
	if leaseMs > 0 {
		c.setInternalLease(k.object, name, leaseMs)
	} else {
		k.renew(c, name, thread)
	}
	return true, 0, token, nil
}

// acquire is RedissonLock.lock (forever) and RedissonLock.tryLock(waitTime,
// leaseTime): try; if refused, subscribe to the channel and, once Redis
// confirms the subscription, try again, and between tries wait on the
// channel's latch for a message, at most the TTL the script answered
// (forever when it answered a negative TTL) and, for tryLock, at most the
// wait time left.
func (c *Client) acquire(ctx context.Context, k *kind, name string, thread int64, forever bool, waitMs, leaseMs int64) (bool, int64, error) {
	if c.closed() {
		return false, 0, ErrClosed
	}
	left := time.Duration(waitMs) * time.Millisecond
	mark := time.Now()
	spend := func() bool {
		now := time.Now()
		left -= now.Sub(mark)
		mark = now
		return !forever && left <= 0
	}
	granted, ttl, token, err := c.tryAcquire(ctx, k, name, thread, leaseMs)
	if err != nil || granted {
		return granted, token, err
	}
	if spend() {
		return false, 0, nil
	}

	sctx := ctx
	if !forever {
		var cancel context.CancelFunc
		sctx, cancel = context.WithTimeout(ctx, left)
		defer cancel()
	}
	sub, err := c.subscribe(sctx, k.channel(name))
	if err != nil {
		if !forever && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return false, 0, nil
		}
		return false, 0, err
	}
	defer c.unsubscribe(sub)
	if spend() {
		return false, 0, nil
	}
	for {
		granted, ttl, token, err = c.tryAcquire(ctx, k, name, thread, leaseMs)
		if err != nil || granted {
			return granted, token, err
		}
		if spend() {
			return false, 0, nil
		}
		wait := time.Duration(ttl) * time.Millisecond
		switch {
		case forever && ttl < 0:
			wait = -1
		case !forever && (ttl < 0 || wait >= left):
			wait = left
		}
		if _, err := sub.latch.acquire(ctx, c.ctx, wait); err != nil {
			return false, 0, err
		}
		if spend() {
			return false, 0, nil
		}
	}
}

// release is RedissonBaseLock.unlockAsync: run the unlock script with a
// fresh latch, then cancel the watchdog for the thread whatever the answer,
// DEL the latch, and report a nil answer as IllegalMonitorStateError.
func (c *Client) release(ctx context.Context, k *kind, name string, thread int64) error {
	latch := UnlockLatchKey(name, requestID())
	held, released, err := k.unlock(ctx, c, name, thread, latch)
	if err == nil {
		c.rdb.Do(ctx, c.rdb.B().Del().Key(latch).Build())
	}
	k.cancel(c, name, &thread)
	if err != nil || !held || released {
		c.setInternalLease(k.object, name, c.watchdogMs())
	}
	if err != nil {
		return err
	}
	if !held {
		return &IllegalMonitorStateError{ID: c.id, Thread: thread}
	}
	return nil
}

// Lock is RLock.lock(leaseMs, MILLISECONDS) for thread; leaseMs <= 0 (-1 in
// Redisson's API) takes the lock under the watchdog. It waits until granted
// or ctx ends.
func (c *Client) Lock(ctx context.Context, name string, thread, leaseMs int64) error {
	_, _, err := c.acquire(ctx, plainKind, name, thread, true, 0, leaseMs)
	return err
}

// TryLock is RLock.tryLock(waitMs, leaseMs, MILLISECONDS): false when not
// granted within waitMs (a negative waitMs tries once).
func (c *Client) TryLock(ctx context.Context, name string, thread, waitMs, leaseMs int64) (bool, error) {
	ok, _, err := c.acquire(ctx, plainKind, name, thread, false, waitMs, leaseMs)
	return ok, err
}

// Unlock is RLock.unlock for thread.
func (c *Client) Unlock(ctx context.Context, name string, thread int64) error {
	return c.release(ctx, plainKind, name, thread)
}

// ForceUnlock is RLock.forceUnlock: stop this client's watchdog for the
// name, delete the hash whoever holds it and, if it existed, publish
// UnlockMessage. It reports whether the hash existed.
func (c *Client) ForceUnlock(ctx context.Context, name string) (bool, error) {
	plainKind.cancel(c, name, nil)
	c.setInternalLease("lock", name, c.watchdogMs())
	n, err := forceUnlockLua.Exec(ctx, c.rdb, []string{name, LockChannel(name)},
		[]string{itoa(UnlockMessage), c.publishCommand()}).AsInt64()
	return n == 1, err
}

// IsLocked is RLock.isLocked: EXISTS name.
func (c *Client) IsLocked(ctx context.Context, name string) (bool, error) {
	n, err := c.rdb.Do(ctx, c.rdb.B().Exists().Key(name).Build()).AsInt64()
	return n == 1, err
}

// IsHeldByThread is RLock.isHeldByThread: HEXISTS name ID:THREAD.
func (c *Client) IsHeldByThread(ctx context.Context, name string, thread int64) (bool, error) {
	return c.rdb.Do(ctx, c.rdb.B().Hexists().Key(name).Field(LockField(c.id, thread)).Build()).AsBool()
}

// HoldCount is RLock.getHoldCount for thread: HGET name ID:THREAD, 0 when
// absent.
func (c *Client) HoldCount(ctx context.Context, name string, thread int64) (int64, error) {
	n, err := c.rdb.Do(ctx, c.rdb.B().Hget().Key(name).Field(LockField(c.id, thread)).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	return n, err
}

// LockFenced is RFencedLock.lockAndGetTokenAsync(leaseMs, MILLISECONDS):
// wait until granted and answer the token the grant INCRed, on reentry
// too. (Redisson's synchronous lockAndGetToken(leaseTime, unit) drops the
// lease and takes the lock under the watchdog; pass -1 for that.)
func (c *Client) LockFenced(ctx context.Context, name string, thread, leaseMs int64) (int64, error) {
	_, token, err := c.acquire(ctx, fencedKind, name, thread, true, 0, leaseMs)
	return token, err
}

// TryLockFenced is RFencedLock.tryLockAndGetToken(waitMs, leaseMs,
// MILLISECONDS): ok false (Redisson answers null) when not granted within
// waitMs; a negative waitMs waits forever.
func (c *Client) TryLockFenced(ctx context.Context, name string, thread, waitMs, leaseMs int64) (token int64, ok bool, err error) {
	ok, token, err = c.acquire(ctx, fencedKind, name, thread, waitMs < 0, waitMs, leaseMs)
	return token, ok, err
}

// LockFencedNoToken is RFencedLock.lock(leaseMs, MILLISECONDS): the grant
// INCRs the token counter, which this call does not read.
func (c *Client) LockFencedNoToken(ctx context.Context, name string, thread, leaseMs int64) error {
	_, _, err := c.acquire(ctx, fencedPlainKind, name, thread, true, 0, leaseMs)
	return err
}

// FencedToken is RFencedLock.getToken: GET redisson_lock_token:{name};
// ok false when the counter does not exist (Redisson answers null).
func (c *Client) FencedToken(ctx context.Context, name string) (token int64, ok bool, err error) {
	token, err = c.rdb.Do(ctx, c.rdb.B().Get().Key(TokenKey(name)).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, false, nil
	}
	return token, err == nil, err
}
