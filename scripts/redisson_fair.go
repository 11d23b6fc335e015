package scripts

import (
	_ "embed"
	"strconv"
	"time"
)

// The Redisson layout's fair lock: the keys of Redisson's RFairLock (see
// redisson_fair_common.lua), so that Go and Java waiters of a name queue in
// one line and each is woken on its own channel.
var (
	//go:embed redisson_fair_common.lua
	redissonFairCommon string
	//go:embed redisson_fair_acquire.lua
	redissonFairAcquire string
	//go:embed redisson_fair_release.lua
	redissonFairRelease string
	//go:embed redisson_fair_keepalive.lua
	redissonFairKeepAlive string
	//go:embed redisson_fair_wake.lua
	redissonFairWake string
	//go:embed redisson_fair_inspect.lua
	redissonFairInspect string
)

// The Redisson fair lock's scripts: each is redisson_fair_common.lua
// followed by its own file. A hold is a field of the hash NAME, renewed as
// an RLock's (RedissonRenewScript).
var (
	RedissonFairAcquireScript   = NewScript("redisson_fair_acquire", redissonFairCommon+redissonFairAcquire)
	RedissonFairReleaseScript   = noSync(NewScript("redisson_fair_release", redissonFairCommon+redissonFairRelease))
	RedissonFairKeepAliveScript = NewScript("redisson_fair_keepalive", redissonFairCommon+redissonFairKeepAlive)
)

// The operator's tools for the Redisson fair lock (Client.Inspect,
// Client.ForceUnlock), run by the holdfast package.
var (
	RedissonFairWake    = redissonFairCommon + redissonFairWake
	RedissonFairInspect = redissonFairCommon + redissonFairInspect
)

// RedissonFairQueueKey is the line of an RFairLock: a list of waiting
// fields.
func RedissonFairQueueKey(name string) string { return RedissonPrefix("redisson_lock_queue", name) }

// RedissonFairTimeoutKey is the deadlines of an RFairLock's waiters: a
// sorted set, field -> Unix milliseconds.
func RedissonFairTimeoutKey(name string) string {
	return RedissonPrefix("redisson_lock_timeout", name)
}

// RedissonFairChannel is the channel of one waiter (field ID:THREAD) of an
// RFairLock: told 0 when the lock is free and that waiter heads the line.
func RedissonFairChannel(name, field string) string { return RedissonLockChannel(name) + ":" + field }

// RedissonFairWakeKeys are the KEYS of redisson_fair_wake.lua and
// redisson_fair_release.lua.
func RedissonFairWakeKeys(name string) []string {
	return []string{name, RedissonFairQueueKey(name), RedissonFairTimeoutKey(name), RedissonLockChannel(name)}
}

// RedissonFairAcquireCall builds the keys and arguments of
// redisson_fair_acquire.lua (mode take, try or place; more: the fields
// placed after field, or, for take, the caller's client's waiters behind
// it).
func RedissonFairAcquireCall(name, field string, lease, waiterTimeout time.Duration, expected int64, mode string, more ...string) (keys, args []string) {
	keys = []string{name, RedissonFairQueueKey(name), RedissonFairTimeoutKey(name), RedissonTokenKey(name), RedissonLockChannel(name)}
	args = append([]string{field, Millis(lease), strconv.FormatInt(expected, 10), Millis(waiterTimeout), mode}, more...)
	return keys, args
}

// RedissonFairReleaseCall builds the keys and arguments of
// redisson_fair_release.lua.
func RedissonFairReleaseCall(name, field string, expected int64) (keys, args []string) {
	return RedissonFairWakeKeys(name), []string{field, strconv.FormatInt(expected, 10)}
}
