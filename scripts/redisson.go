package scripts

import (
	_ "embed"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
)

// The Redisson layout (Config.Layout = LayoutRedisson): the keys, fields,
// channels and messages of Redisson's RLock, RFencedLock and
// RReadWriteLock, so that Go and Java processes lock the same names. The
// scripts are holdfast's own, written from Redisson's documented protocol
// (summarised in internal/redissontest's package doc):
//
//	NAME                                hash: field ID:THREAD -> reentry count (RLock);
//	                                    mode -> read|write, ID:THREAD (reader),
//	                                    ID:THREAD:write (writer) (RReadWriteLock); PEXPIRE = lease
//	redisson_lock__channel:{NAME}       RLock's channel: 0 when a release frees the lock
//	redisson_rwlock:{NAME}              RReadWriteLock's channel: 0 (last reader left), 1 (writer left)
//	redisson_lock_token:{NAME}          RFencedLock's token counter, INCRed by every grant
//	{NAME}:ID:THREAD:rwlock_timeout:N   a reader's N-th nested hold's own lease
//
// A name holding '{' is used as is where Redisson wraps it in braces
// (RedissonPrefix, RedissonSuffix), so every key of a name lies in its slot.
var (
	//go:embed redisson_acquire.lua
	RedissonAcquire string
	//go:embed redisson_release.lua
	RedissonRelease string
	//go:embed redisson_rw_acquire.lua
	RedissonRWAcquire string
	//go:embed redisson_rw_release.lua
	RedissonRWRelease string
	//go:embed redisson_rw_renew.lua
	RedissonRWRenew string
	// The operator's tools (Client.Inspect, Client.ForceUnlock) and
	// RedLock's fence raise under the layout.
	//go:embed redisson_inspect.lua
	RedissonInspect string
	//go:embed redisson_force_unlock.lua
	RedissonForceUnlock string
	//go:embed redisson_fence_raise.lua
	RedissonFenceRaise string
)

// The Redisson layout's scripts, registered for the runtimes. But for the
// token counter's, their first key is the lock name itself (keyedByName).
var (
	RedissonAcquireScript   = keyedByName(NewScript("redisson_acquire", RedissonAcquire))
	RedissonReleaseScript   = keyedByName(noSync(NewScript("redisson_release", RedissonRelease)))
	RedissonRenewScript     = keyedByName(withHoldKey(renews(NewScript("redisson_renew", HashRenew)), redissonHashKey))
	RedissonRWAcquireScript = keyedByName(NewScript("redisson_rw_acquire", RedissonRWAcquire))
	RedissonRWReleaseScript = keyedByName(noSync(NewScript("redisson_rw_release", RedissonRWRelease)))
	RedissonRWRenewScript   = keyedByName(withHoldKey(renews(NewScript("redisson_rw_renew", RedissonRWRenew)), redissonHashKey))
	// RedissonFenceRaiseScript raises a name's token counter (RedLock).
	RedissonFenceRaiseScript = NewScript("redisson_fence_raise", RedissonFenceRaise)
)

// keyedByName marks s as a script whose first key is the lock name.
func keyedByName(s *Script) *Script {
	s.KeyIsName = true
	return s
}

// redissonHashKey: under the Redisson layout the lock hash is the name itself.
func redissonHashKey(name, _ string) string { return name }

// RedissonPrefix is Redisson's prefixName: prefix + ":{" + name + "}", or
// prefix + ":" + name when name holds a '{'.
func RedissonPrefix(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// RedissonSuffix is Redisson's suffixName: "{" + name + "}:" + suffix, or
// name + ":" + suffix when name holds a '{'.
func RedissonSuffix(name, suffix string) string {
	if strings.Contains(name, "{") {
		return name + ":" + suffix
	}
	return "{" + name + "}:" + suffix
}

// RedissonLockChannel is the channel of an RLock or RFencedLock.
func RedissonLockChannel(name string) string { return RedissonPrefix("redisson_lock__channel", name) }

// RedissonRWChannel is the channel of an RReadWriteLock.
func RedissonRWChannel(name string) string { return RedissonPrefix("redisson_rwlock", name) }

// RedissonTokenKey is RFencedLock's token counter of name.
func RedissonTokenKey(name string) string { return RedissonPrefix("redisson_lock_token", name) }

// RedissonTimeoutPrefix is the prefix of a reader's timeout keys:
// {NAME}:ID:THREAD:rwlock_timeout (a hold's N-th key appends ":N").
func RedissonTimeoutPrefix(name, field string) string {
	return RedissonSuffix(name, field) + ":rwlock_timeout"
}

// RedissonWriteSuffix ends a writer's field: ID:THREAD:write.
const RedissonWriteSuffix = ":write"

// RedissonField is the hash field of one owner under the Redisson layout,
// shaped as Redisson's ID:THREAD: id names the Client (it holds no ':'),
// and THREAD is a decimal: n for the n-th anonymous Lock call of the Client
// (owner ""), or 2^62 plus a 62-bit FNV-1a hash of a WithOwner id, so that
// an owner keeps one field and the two never meet.
func RedissonField(id, owner string, n uint64) string {
	if owner == "" {
		// One allocation: every anonymous Lock call makes one of these.
		var num [20]byte
		digits := strconv.AppendUint(num[:0], n, 10)
		var b strings.Builder
		b.Grow(len(id) + 1 + len(digits))
		b.WriteString(id)
		b.WriteByte(':')
		b.Write(digits)
		return b.String()
	}
	h := fnv.New64a()
	h.Write([]byte(owner))
	return id + ":" + strconv.FormatUint(1<<62|h.Sum64()&(1<<62-1), 10)
}

// RedissonAcquireKeys are the KEYS of redisson_acquire.lua.
func RedissonAcquireKeys(name string) []string { return []string{name, RedissonTokenKey(name)} }

// RedissonAcquireArgs are the ARGV of redisson_acquire.lua.
func RedissonAcquireArgs(field string, lease time.Duration, expected int64) []string {
	return []string{field, Millis(lease), strconv.FormatInt(expected, 10)}
}

// RedissonReleaseKeys are the KEYS of redisson_release.lua.
func RedissonReleaseKeys(name string) []string { return []string{name, RedissonLockChannel(name)} }

// RedissonReleaseArgs are the ARGV of redisson_release.lua.
func RedissonReleaseArgs(field string, expected int64) []string {
	return []string{field, strconv.FormatInt(expected, 10)}
}

// RedissonRWMode returns the owner (reader) field of a read-write hold
// field and whether it is a write hold's (ID:THREAD:write).
func RedissonRWMode(field string) (owner string, write bool) {
	if o, ok := strings.CutSuffix(field, RedissonWriteSuffix); ok {
		return o, true
	}
	return field, false
}

func rwFlag(write bool) string {
	if write {
		return "w"
	}
	return "r"
}

// RedissonRWAcquireCall builds the keys and arguments of
// redisson_rw_acquire.lua for hold field (ID:THREAD or ID:THREAD:write).
func RedissonRWAcquireCall(name, field string, lease time.Duration, expected int64) (keys, args []string) {
	owner, write := RedissonRWMode(field)
	return []string{name, RedissonTokenKey(name), RedissonTimeoutPrefix(name, owner)},
		[]string{field, Millis(lease), strconv.FormatInt(expected, 10), rwFlag(write)}
}

// RedissonRWReleaseCall builds the keys and arguments of
// redisson_rw_release.lua.
func RedissonRWReleaseCall(name, field string, expected int64) (keys, args []string) {
	owner, write := RedissonRWMode(field)
	return []string{name, RedissonRWChannel(name), RedissonTimeoutPrefix(name, owner)},
		[]string{field, strconv.FormatInt(expected, 10), rwFlag(write)}
}
