package redissontest

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// RPermitExpirableSemaphore (RedissonPermitExpirableSemaphore, SemaphorePubSub).
//
// Keys: NAME, a string holding the count of free permits; the lease
// records suffixName(NAME, "timeout") = {NAME}:timeout, a sorted set of
// permit ids (ServiceManager.generateId: 16 random bytes, sent and stored
// as the raw bytes, shown to the API's caller as 32 hex digits) scored with
// the end of their lease in Unix ms of the CALLER's clock
// (System.currentTimeMillis() + lease), or 922337203685477 (nonExpirableTimeout)
// for a permit taken without a lease; the channel
// prefixName("redisson_sc", NAME) = redisson_sc:{NAME}. The semaphore's size
// is never stored: it is the free count plus the records.
//
// Every script that reads the free count first takes back the records whose
// score is at most the caller's now (ZRANGEBYSCORE 0 now; the acquire limits
// it to as many as it asks for): ZREM, INCRBY NAME by their number, and when
// the result is positive publishes it. tryAcquire then DECRBYs and ZADDs its
// ids when NAME holds enough, copying NAME's PTTL to the records if it has
// one; else it answers ":" followed by the lowest record's score (when that
// record has a lease), which the caller waits for at most, or nil. A
// release ZREMs its id, INCRBYs NAME by 1 and publishes the new count
// (whatever its sign), answering false when the id was not there or its
// lease had ended by the caller's clock. trySetPermits SETs NAME when
// absent and publishes the count. The publish command is PUBLISH or
// SPUBLISH as for the locks.
//
// Waiting: subscribe to the channel (one RedissonLockEntry per channel per
// client, as for the locks), try, and between tries wait on the entry's
// latch at most the time left and, with a ":" answer, at most until that
// lease ends. A message n releases min(entry.acquired(), n) latch permits
// (SemaphorePubSub.onMessage): up to n waiting threads of the client wake.
// This client wakes up to n waiters and keeps at most one permit for a
// thread between tries.

const (
	// SemChannelPrefix names an RPermitExpirableSemaphore's channel.
	SemChannelPrefix = "redisson_sc"
	// NonExpirableTimeout is the lease record score of a permit taken
	// without a lease.
	NonExpirableTimeout = 922337203685477
)

// SemChannel is the channel of the semaphore name: redisson_sc:{name}.
func SemChannel(name string) string { return PrefixName(SemChannelPrefix, name) }

// SemTimeoutKey is the lease records of the semaphore name: {name}:timeout.
func SemTimeoutKey(name string) string { return SuffixName(name, "timeout") }

// IllegalArgumentError is Redisson's IllegalArgumentException from
// release: the permit is not held (already released, its lease ended, or
// never taken).
type IllegalArgumentError struct{ PermitID string }

func (e *IllegalArgumentError) Error() string {
	return "Permit with id " + e.PermitID + " has already been released or doesn't exist"
}

// SemTryAcquireSrc is the script of RedissonPermitExpirableSemaphore's
// tryAcquireAsync(ids, timeoutDate) (exported for the simulator's Java-like
// clients).
// KEYS[1] NAME, KEYS[2] {NAME}:timeout, KEYS[3] channel. ARGV[1] number of
// permits, ARGV[2] lease end (ms), ARGV[3] now (ms), ARGV[4]
// nonExpirableTimeout, ARGV[5] publish command, ARGV[6..] the raw ids.
const SemTryAcquireSrc = `
local free, records, channel = KEYS[1], KEYS[2], KEYS[3]
local want = tonumber(ARGV[1])
local over = redis.call('zrangebyscore', records, 0, ARGV[3], 'limit', 0, want)
if #over > 0 then
  redis.call('zrem', records, unpack(over))
  local n = redis.call('incrby', free, #over)
  if n > 0 then redis.call(ARGV[5], channel, n) end
end
local have = redis.call('get', free)
if have and tonumber(have) >= want then
  redis.call('decrby', free, want)
  for i = 6, #ARGV do redis.call('zadd', records, ARGV[2], ARGV[i]) end
  local ttl = redis.call('pttl', free)
  if ttl > 0 then redis.call('pexpire', records, ttl) end
  return 'OK'
end
local first = redis.call('zrange', records, 0, 0, 'withscores')
if first[1] and first[2] ~= ARGV[4] then
  return ':' .. first[2]
end
return false
`

var semTryAcquireLua = rueidis.NewLuaScript(SemTryAcquireSrc)

// SemReleaseSrc is the script of tryReleaseAsync(permitId) (exported for
// the simulator's Java-like clients).
// KEYS[1] NAME, KEYS[2] channel, KEYS[3] {NAME}:timeout. ARGV[1] raw id,
// ARGV[2] 1, ARGV[3] now (ms), ARGV[4] publish command. 1 released, 0 not
// held or its lease had ended (the record is taken back all the same).
const SemReleaseSrc = `
local ends = redis.call('zscore', KEYS[3], ARGV[1])
if redis.call('zrem', KEYS[3], ARGV[1]) ~= 1 then return 0 end
local n = redis.call('incrby', KEYS[1], ARGV[2])
redis.call(ARGV[4], KEYS[2], n)
if tonumber(ends) <= tonumber(ARGV[3]) then return 0 end
return 1
`

var semReleaseLua = rueidis.NewLuaScript(SemReleaseSrc)

// semAvailableLua is availablePermitsAsync.
// KEYS[1] NAME, KEYS[2] {NAME}:timeout, KEYS[3] channel. ARGV[1] now (ms),
// ARGV[2] publish command.
var semAvailableLua = rueidis.NewLuaScript(`
local over = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1])
if #over > 0 then
  redis.call('zrem', KEYS[2], unpack(over))
  local n = redis.call('incrby', KEYS[1], #over)
  if n > 0 then redis.call(ARGV[2], KEYS[3], n) end
  return n
end
return tonumber(redis.call('get', KEYS[1]) or '0')
`)

// semTrySetLua is trySetPermitsAsync. KEYS[1] NAME, KEYS[2] channel.
// ARGV[1] permits, ARGV[2] publish command.
var semTrySetLua = rueidis.NewLuaScript(`
if redis.call('exists', KEYS[1]) == 1 then return 0 end
redis.call('set', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1
`)

// nowMsText is the Java host's clock in Unix milliseconds, as Redisson passes it.
func nowMsText() string { return strconv.FormatInt(nowMs(), 10) }

// TrySetPermits is RPermitExpirableSemaphore.trySetPermits: set the size of
// a semaphore that does not exist yet; false when it does.
func (c *Client) TrySetPermits(ctx context.Context, name string, permits int) (bool, error) {
	n, err := semTrySetLua.Exec(ctx, c.rdb, []string{name, SemChannel(name)},
		[]string{strconv.Itoa(permits), c.publishCommand()}).AsInt64()
	return n == 1, err
}

// AvailablePermits is RPermitExpirableSemaphore.availablePermits.
func (c *Client) AvailablePermits(ctx context.Context, name string) (int64, error) {
	return semAvailableLua.Exec(ctx, c.rdb, []string{name, SemTimeoutKey(name), SemChannel(name)},
		[]string{nowMsText(), c.publishCommand()}).AsInt64()
}

// trySem runs the acquire script once for one permit: its id when granted,
// else the end of the earliest lease (ok false, ends 0 when none answers).
func (c *Client) trySem(ctx context.Context, name string, leaseMs int64) (id string, ends int64, err error) {
	id = requestID()
	raw, _ := hex.DecodeString(id)
	end := int64(NonExpirableTimeout)
	if leaseMs > 0 {
		end = time.Now().UnixMilli() + leaseMs
	}
	s, err := semTryAcquireLua.Exec(ctx, c.rdb, []string{name, SemTimeoutKey(name), SemChannel(name)},
		[]string{"1", strconv.FormatInt(end, 10), nowMsText(), strconv.Itoa(NonExpirableTimeout), c.publishCommand(), string(raw)}).ToString()
	switch {
	case rueidis.IsRedisNil(err):
		return "", 0, nil
	case err != nil:
		return "", 0, err
	case s == "OK":
		return id, 0, nil
	case strings.HasPrefix(s, ":"):
		ends, err := strconv.ParseInt(s[1:], 10, 64)
		if err != nil {
			return "", 0, fmt.Errorf("redissontest: semaphore acquire answered %q", s)
		}
		return "", ends, nil
	}
	return "", 0, fmt.Errorf("redissontest: semaphore acquire answered %q", s)
}

// TryAcquirePermit is RPermitExpirableSemaphore.tryAcquire(waitMs, leaseMs,
// MILLISECONDS): a permit id, or ok false when none was free within waitMs
// (0 tries once). leaseMs <= 0 (-1 in Redisson's API) takes a permit with no
// lease.
func (c *Client) TryAcquirePermit(ctx context.Context, name string, waitMs, leaseMs int64) (id string, ok bool, err error) {
	return c.acquirePermit(ctx, name, false, waitMs, leaseMs)
}

// AcquirePermit is RPermitExpirableSemaphore.acquire(leaseMs, MILLISECONDS):
// wait until a permit is free or ctx ends.
func (c *Client) AcquirePermit(ctx context.Context, name string, leaseMs int64) (string, error) {
	id, _, err := c.acquirePermit(ctx, name, true, 0, leaseMs)
	return id, err
}

func (c *Client) acquirePermit(ctx context.Context, name string, forever bool, waitMs, leaseMs int64) (string, bool, error) {
	if c.closed() {
		return "", false, ErrClosed
	}
	left := time.Duration(waitMs) * time.Millisecond
	mark := time.Now()
	spend := func() bool {
		now := time.Now()
		left -= now.Sub(mark)
		mark = now
		return !forever && left <= 0
	}
	id, _, err := c.trySem(ctx, name, leaseMs)
	if err != nil || id != "" {
		return id, id != "", err
	}
	if spend() {
		return "", false, nil
	}
	sctx := ctx
	if !forever {
		var cancel context.CancelFunc
		sctx, cancel = context.WithTimeout(ctx, left)
		defer cancel()
	}
	sub, err := c.subscribe(sctx, SemChannel(name))
	if err != nil {
		if !forever && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return "", false, nil
		}
		return "", false, err
	}
	defer c.unsubscribe(sub)
	for {
		if spend() {
			return "", false, nil
		}
		id, ends, err := c.trySem(ctx, name, leaseMs)
		if err != nil || id != "" {
			return id, id != "", err
		}
		if spend() {
			return "", false, nil
		}
		wait := time.Duration(-1)
		if !forever {
			wait = left
		}
		if ends > 0 {
			if d := time.Until(time.UnixMilli(ends)); wait < 0 || d < wait {
				wait = max(d, 0)
			}
		}
		if _, err := sub.latch.acquire(ctx, c.ctx, wait); err != nil {
			return "", false, err
		}
	}
}

// TryReleasePermit is RPermitExpirableSemaphore.tryRelease(permitId):
// false when the permit was not held or its lease had ended.
func (c *Client) TryReleasePermit(ctx context.Context, name, id string) (bool, error) {
	raw, err := hex.DecodeString(id)
	if err != nil {
		return false, err
	}
	n, err := semReleaseLua.Exec(ctx, c.rdb, []string{name, SemChannel(name), SemTimeoutKey(name)},
		[]string{string(raw), "1", nowMsText(), c.publishCommand()}).AsInt64()
	return n == 1, err
}

// ReleasePermit is RPermitExpirableSemaphore.release(permitId).
func (c *Client) ReleasePermit(ctx context.Context, name, id string) error {
	ok, err := c.TryReleasePermit(ctx, name, id)
	if err == nil && !ok {
		err = &IllegalArgumentError{PermitID: id}
	}
	return err
}

// semMessage is SemaphorePubSub.onMessage for s: the message is the free
// count a release or a take-back left; that many waiting threads wake.
func (s *subscription) semMessage(msg string) {
	n, err := strconv.Atoi(msg)
	if err != nil || n <= 0 {
		return
	}
	s.latch.releaseUpTo(n)
}

// releaseUpTo wakes up to n waiters; with fewer waiting it keeps one permit
// for a thread between tries.
func (s *semaphore) releaseUpTo(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n > 0 && len(s.waiters) > 0 {
		s.waiters[0] <- struct{}{}
		s.waiters = s.waiters[1:]
		n--
	}
	if n > 0 && s.permits == 0 {
		s.permits = 1
	}
}
