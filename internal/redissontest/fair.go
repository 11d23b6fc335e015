package redissontest

import (
	"context"
	"errors"
	"time"

	"github.com/redis/rueidis"
)

// RFairLock (RedissonFairLock, a RedissonLock), as read at the commit named
// in doc.go. Its keys besides the lock hash NAME (an RLock's):
//
//	redisson_lock_queue:{NAME}    list of waiting ID:THREAD, first come first
//	redisson_lock_timeout:{NAME}  sorted set ID:THREAD -> deadline, the
//	                              client's System.currentTimeMillis() based
//	redisson_lock__channel:{NAME}:ID:THREAD  the waiter's own channel
//
// The waiter's wait W is Config.fairLockWaitTimeout (5 minutes by
// default), or tryLock's waitTime when > 0. Acquire (EVAL_LONG, KEYS NAME,
// queue, timeouts; ARGV lease, ID:THREAD, W, now): drop the heads of the
// queue whose deadline <= now; if NAME does not exist and the queue is
// empty or headed by the caller: LPOP, ZREM the caller, ZINCRBY -W on
// every deadline left, HSET NAME field 1, PEXPIRE lease, reply nil; a
// reentry HINCRBYs and PEXPIREs, nil; a caller already queued gets
// max(0, PTTL NAME); else it is queued with deadline (the last waiter's
// deadline - now, or PTTL NAME when none) + W + now (ZADD, then RPUSH when
// new) and gets that first term. Unlock (KEYS NAME, queue, timeouts,
// channel, latch): the latch as RLock's; drop dead heads; NAME gone:
// publish 0 to the head's channel, reply 1; not held: nil; HINCRBY -1 > 0:
// PEXPIRE internalLockLeaseTime, 0; else DEL NAME, publish 0 to the
// head's channel, 1. A waiter that gives up (tryLock timing out) runs
// acquireFailed: ZINCRBY -W on every waiter behind it, ZREM, LREM.
// forceUnlock: drop dead heads; DEL NAME and, if it existed, publish 0 to
// the head's channel. lock()/tryLock() subscribe to the caller's own
// channel and loop as RLock's do.

// DefaultFairLockWaitTimeout is Redisson's Config.fairLockWaitTimeout.
const DefaultFairLockWaitTimeout = 5 * time.Minute

// WithFairLockWaitTimeout sets Config.fairLockWaitTimeout.
func WithFairLockWaitTimeout(d time.Duration) Option {
	return func(c *Client) { c.fairWait = d.Milliseconds() }
}

// FairQueueKey is redisson_lock_queue:{NAME}.
func FairQueueKey(name string) string { return PrefixName("redisson_lock_queue", name) }

// FairTimeoutKey is redisson_lock_timeout:{NAME}.
func FairTimeoutKey(name string) string { return PrefixName("redisson_lock_timeout", name) }

// FairChannel is the channel of waiter thread of client id.
func FairChannel(name, id string, thread int64) string {
	return LockChannel(name) + ":" + LockField(id, thread)
}

// fairPrune drops the dead heads of the queue (shared by the scripts
// below: KEYS[2] queue, KEYS[3] timeouts, now in ms).
const fairPrune = `
local function prune(now)
  while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if not head then return end
    local d = redis.call('zscore', KEYS[3], head)
    if not d or tonumber(d) > now then return end
    redis.call('zrem', KEYS[3], head)
    redis.call('lpop', KEYS[2])
  end
end
`

// fairAcquireLua is RedissonFairLock.tryLockInnerAsync (EVAL_LONG).
// KEYS[1] NAME, KEYS[2] queue, KEYS[3] timeouts. ARGV[1] lease ms, ARGV[2]
// field, ARGV[3] wait ms, ARGV[4] now ms. nil when granted, else a TTL.
var fairAcquireLua = rueidis.NewLuaScript(fairPrune + `
local lock, queue, timeouts = KEYS[1], KEYS[2], KEYS[3]
local lease, me, wait, now = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
prune(now)
if redis.call('exists', lock) == 0 then
  local head = redis.call('lindex', queue, 0)
  if not head or head == me then
    redis.call('lpop', queue)
    redis.call('zrem', timeouts, me)
    for _, f in ipairs(redis.call('zrange', timeouts, 0, -1)) do
      redis.call('zincrby', timeouts, -wait, f)
    end
    redis.call('hset', lock, me, 1)
    redis.call('pexpire', lock, lease)
    return false
  end
end
if redis.call('hexists', lock, me) == 1 then
  redis.call('hincrby', lock, me, 1)
  redis.call('pexpire', lock, lease)
  return false
end
if redis.call('zscore', timeouts, me) then
  return math.max(0, redis.call('pttl', lock))
end
local last = redis.call('lindex', queue, -1)
local ttl
local lastDeadline = last and last ~= me and redis.call('zscore', timeouts, last)
if lastDeadline then
  ttl = tonumber(lastDeadline) - now
else
  ttl = redis.call('pttl', lock)
end
if redis.call('zadd', timeouts, ttl + wait + now, me) == 1 then
  redis.call('rpush', queue, me)
end
return ttl
`)

// fairUnlockLua is RedissonFairLock.unlockInnerAsync.
// KEYS[1] NAME, KEYS[2] queue, KEYS[3] timeouts, KEYS[4] channel prefix,
// KEYS[5] latch. ARGV[1] message 0, ARGV[2] lease ms, ARGV[3] field,
// ARGV[4] now ms, ARGV[5] publish command, ARGV[6] latch PX.
var fairUnlockLua = rueidis.NewLuaScript(fairPrune + `
local lock, queue, channel, latch = KEYS[1], KEYS[2], KEYS[4], KEYS[5]
local earlier = redis.call('get', latch)
if earlier then return tonumber(earlier) end
prune(tonumber(ARGV[4]))
local function tell()
  local head = redis.call('lindex', queue, 0)
  if head then redis.call(ARGV[5], channel .. ':' .. head, ARGV[1]) end
end
if redis.call('exists', lock) == 0 then
  tell()
  redis.call('set', latch, '1', 'px', ARGV[6])
  return 1
end
if redis.call('hexists', lock, ARGV[3]) == 0 then return false end
if redis.call('hincrby', lock, ARGV[3], -1) > 0 then
  redis.call('pexpire', lock, ARGV[2])
  redis.call('set', latch, '0', 'px', ARGV[6])
  return 0
end
redis.call('del', lock)
redis.call('set', latch, '1', 'px', ARGV[6])
tell()
return 1
`)

// fairAcquireFailedLua is RedissonFairLock.acquireFailedAsync.
// KEYS[1] queue, KEYS[2] timeouts. ARGV[1] field, ARGV[2] wait ms.
var fairAcquireFailedLua = rueidis.NewLuaScript(`
local queue = redis.call('lrange', KEYS[1], 0, -1)
local i = 1
while i <= #queue and queue[i] ~= ARGV[1] do i = i + 1 end
for j = i + 1, #queue do
  redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[j])
end
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('lrem', KEYS[1], 0, ARGV[1])
`)

// fairForceUnlockLua is RedissonFairLock.forceUnlockAsync.
// KEYS[1] NAME, KEYS[2] queue, KEYS[3] timeouts, KEYS[4] channel prefix.
// ARGV[1] message 0, ARGV[2] now ms, ARGV[3] publish command.
var fairForceUnlockLua = rueidis.NewLuaScript(fairPrune + `
prune(tonumber(ARGV[2]))
if redis.call('del', KEYS[1]) == 1 then
  local head = redis.call('lindex', KEYS[2], 0)
  if head then redis.call(ARGV[3], KEYS[4] .. ':' .. head, ARGV[1]) end
  return 1
end
return 0
`)

func nowMs() int64 { return time.Now().UnixMilli() }

// fairWaitMs is the W of a call with waitMs (tryLock's; <= 0: none).
func (c *Client) fairWaitMs(waitMs int64) int64 {
	if waitMs > 0 {
		return waitMs
	}
	return c.fairWait
}

// FairTryAcquire runs the fair acquire script once for thread, as one
// tryAcquire of RFairLock.lock (waitMs <= 0) or tryLock(waitMs): granted,
// or the TTL answered. A refused caller is left in the queue: a client
// that calls nothing more afterwards is a waiter whose process died.
func (c *Client) FairTryAcquire(ctx context.Context, name string, thread, waitMs, leaseMs int64) (bool, int64, error) {
	lease := leaseMs
	if leaseMs <= 0 {
		lease = c.internalLease("fair", name)
	}
	ttl, err := fairAcquireLua.Exec(ctx, c.rdb, []string{name, FairQueueKey(name), FairTimeoutKey(name)},
		[]string{itoa(lease), LockField(c.id, thread), itoa(c.fairWaitMs(waitMs)), itoa(nowMs())}).AsInt64()
	if rueidis.IsRedisNil(err) {
		if leaseMs > 0 {
			c.setInternalLease("fair", name, leaseMs)
		} else {
			c.locks.add(name, thread, LockField(c.id, thread), "")
		}
		return true, 0, nil
	}
	return false, ttl, err
}

// fairAcquireFailed is acquireFailed: the waiter leaves the queue.
func (c *Client) fairAcquireFailed(name string, thread, waitMs int64) {
	// Its own context: Redisson runs it even when the caller was interrupted.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fairAcquireFailedLua.Exec(ctx, c.rdb, []string{FairQueueKey(name), FairTimeoutKey(name)},
		[]string{LockField(c.id, thread), itoa(c.fairWaitMs(waitMs))})
}

// fairAcquire is RedissonLock.lock / tryLock over RFairLock's scripts and
// the caller's own channel.
func (c *Client) fairAcquire(ctx context.Context, name string, thread int64, forever bool, waitMs, leaseMs int64) (bool, error) {
	if c.closed() {
		return false, ErrClosed
	}
	deadline := time.Now().Add(time.Duration(waitMs) * time.Millisecond)
	left := func() time.Duration { return time.Until(deadline) }
	giveUp := func(err error) (bool, error) {
		if !forever {
			c.fairAcquireFailed(name, thread, waitMs)
		}
		return false, err
	}
	granted, ttl, err := c.FairTryAcquire(ctx, name, thread, waitMs, leaseMs)
	if err != nil || granted {
		return granted, err
	}
	if !forever && left() <= 0 {
		return giveUp(nil)
	}
	sctx := ctx
	if !forever {
		var cancel context.CancelFunc
		sctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	sub, err := c.subscribe(sctx, FairChannel(name, c.id, thread))
	if err != nil {
		if !forever && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return giveUp(nil)
		}
		return giveUp(err)
	}
	defer c.unsubscribe(sub)
	for {
		granted, ttl, err = c.FairTryAcquire(ctx, name, thread, waitMs, leaseMs)
		if err != nil || granted {
			return granted, err
		}
		if !forever && left() <= 0 {
			return giveUp(nil)
		}
		wait := time.Duration(ttl) * time.Millisecond
		switch {
		case forever && ttl < 0:
			wait = -1
		case !forever && (ttl < 0 || wait >= left()):
			wait = left()
		}
		if _, err := sub.latch.acquire(ctx, c.ctx, wait); err != nil {
			return giveUp(err)
		}
	}
}

// FairLock is RFairLock.lock(leaseMs, MILLISECONDS) for thread (leaseMs
// <= 0: under the watchdog). It waits until granted or ctx ends.
func (c *Client) FairLock(ctx context.Context, name string, thread, leaseMs int64) error {
	_, err := c.fairAcquire(ctx, name, thread, true, 0, leaseMs)
	return err
}

// FairTryLock is RFairLock.tryLock(waitMs, leaseMs, MILLISECONDS): false
// when not granted within waitMs, the waiter then leaving the queue.
func (c *Client) FairTryLock(ctx context.Context, name string, thread, waitMs, leaseMs int64) (bool, error) {
	return c.fairAcquire(ctx, name, thread, false, waitMs, leaseMs)
}

// FairUnlock is RFairLock.unlock for thread.
func (c *Client) FairUnlock(ctx context.Context, name string, thread int64) error {
	latch := UnlockLatchKey(name, requestID())
	n, err := fairUnlockLua.Exec(ctx, c.rdb,
		[]string{name, FairQueueKey(name), FairTimeoutKey(name), LockChannel(name), latch},
		[]string{itoa(UnlockMessage), itoa(c.internalLease("fair", name)), LockField(c.id, thread),
			itoa(nowMs()), c.publishCommand(), itoa(c.latchMs)}).AsInt64()
	held := !rueidis.IsRedisNil(err)
	if err != nil && held {
		return err
	}
	c.rdb.Do(ctx, c.rdb.B().Del().Key(latch).Build())
	c.locks.cancel(name, &thread)
	if !held || n == 1 {
		c.setInternalLease("fair", name, c.watchdogMs())
	}
	if !held {
		return &IllegalMonitorStateError{ID: c.id, Thread: thread}
	}
	return nil
}

// FairForceUnlock is RFairLock.forceUnlock; it reports whether NAME existed.
func (c *Client) FairForceUnlock(ctx context.Context, name string) (bool, error) {
	c.locks.cancel(name, nil)
	c.setInternalLease("fair", name, c.watchdogMs())
	n, err := fairForceUnlockLua.Exec(ctx, c.rdb,
		[]string{name, FairQueueKey(name), FairTimeoutKey(name), LockChannel(name)},
		[]string{itoa(UnlockMessage), itoa(nowMs()), c.publishCommand()}).AsInt64()
	return n == 1, err
}
