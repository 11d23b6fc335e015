package redissontest

import (
	"strconv"
	"strings"
	"time"
)

// Protocol constants. See doc.go for where each comes from.
const (
	// UnlockMessage is published on a lock's channel when a plain lock or a
	// read lock is released, and on forceUnlock of a plain lock or a read
	// lock. A waiter that receives it wakes one waiting thread of its client.
	UnlockMessage = 0
	// ReadUnlockMessage is published on the rwlock channel when a write
	// lock is released (or force-unlocked, or found free on unlock). A
	// waiter that receives it wakes every waiting thread of its client.
	ReadUnlockMessage = 1

	// LockChannelPrefix names the channel of an RLock and RFencedLock.
	LockChannelPrefix = "redisson_lock__channel"
	// RWLockChannelPrefix names the channel shared by an RReadWriteLock's
	// read and write locks.
	RWLockChannelPrefix = "redisson_rwlock"
	// TokenPrefix names an RFencedLock's token counter (a string key).
	TokenPrefix = "redisson_lock_token"
	// UnlockLatchPrefix names the per-request unlock latch keys.
	UnlockLatchPrefix = "redisson_unlock_latch"

	// ModeField is the rwlock hash field holding "read" or "write".
	ModeField = "mode"
	// ModeRead and ModeWrite are ModeField's values.
	ModeRead  = "read"
	ModeWrite = "write"

	// WriteSuffix ends a write-lock holder's field: ID:THREAD:write.
	WriteSuffix = ":write"
	// RWTimeoutSuffix ends a reader's timeout-key prefix.
	RWTimeoutSuffix = ":rwlock_timeout"

	// DefaultWatchdogTimeout is Redisson's Config.lockWatchdogTimeout.
	DefaultWatchdogTimeout = 30 * time.Second
	// WatchdogBatchSize is Redisson's Config.lockWatchdogBatchSize: how
	// many lock names one renewal EVAL carries at most.
	WatchdogBatchSize = 100
	// DefaultUnlockLatchTimeoutMs is the PX of an unlock latch with
	// Redisson's default config: (timeout 3000 + retryDelay.calcDelay(4))
	// * retryAttempts 4, where the delay is EqualJitterDelay(1 s, 2 s) at
	// attempt 4, i.e. 1000..2000 ms; so 16000..20000 ms. This client uses
	// the upper bound.
	DefaultUnlockLatchTimeoutMs = 20000
)

// PrefixName is Redisson's RedissonObject.prefixName: prefix + ":" + name
// when name contains "{", else prefix + ":{" + name + "}".
func PrefixName(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// SuffixName is Redisson's RedissonObject.suffixName: name + ":" + suffix
// when name contains "{", else "{" + name + "}:" + suffix.
func SuffixName(name, suffix string) string {
	if strings.Contains(name, "{") {
		return name + ":" + suffix
	}
	return "{" + name + "}:" + suffix
}

// LockChannel is the pub/sub channel of an RLock or RFencedLock named
// name: redisson_lock__channel:{name}.
func LockChannel(name string) string { return PrefixName(LockChannelPrefix, name) }

// RWLockChannel is the channel of an RReadWriteLock named name, used by
// both its read and its write lock: redisson_rwlock:{name}.
func RWLockChannel(name string) string { return PrefixName(RWLockChannelPrefix, name) }

// TokenKey is the fencing token counter of an RFencedLock named name:
// redisson_lock_token:{name}.
func TokenKey(name string) string { return PrefixName(TokenPrefix, name) }

// UnlockLatchKey is the latch an unlock request sets:
// redisson_unlock_latch:{name}:requestID.
func UnlockLatchKey(name, requestID string) string {
	return PrefixName(UnlockLatchPrefix, name) + ":" + requestID
}

// LockField is a holder's hash field: ID:THREAD (RedissonBaseLock.getLockName).
func LockField(id string, thread int64) string {
	return id + ":" + strconv.FormatInt(thread, 10)
}

// WriteField is a write-lock holder's hash field: ID:THREAD:write
// (RedissonWriteLock.getLockName).
func WriteField(id string, thread int64) string { return LockField(id, thread) + WriteSuffix }

// ReadTimeoutPrefix is a reader's timeout-key prefix
// (RedissonReadLock.getReadWriteTimeoutNamePrefix):
// SuffixName(name, ID:THREAD) + ":rwlock_timeout", so
// {name}:ID:THREAD:rwlock_timeout, or name:ID:THREAD:rwlock_timeout when
// name contains "{".
func ReadTimeoutPrefix(name, id string, thread int64) string {
	return SuffixName(name, LockField(id, thread)) + RWTimeoutSuffix
}

// ReadTimeoutKey is the timeout key of a reader's n-th nested read hold
// (n from 1): ReadTimeoutPrefix + ":" + n.
func ReadTimeoutKey(name, id string, thread int64, n int64) string {
	return ReadTimeoutPrefix(name, id, thread) + ":" + strconv.FormatInt(n, 10)
}

// ReadKeyPrefix is what RedissonReadLock.getKeyPrefix yields: the timeout
// prefix up to ":ID:THREAD", i.e. "{name}", or name itself when it
// contains "{". A reader field f's n-th timeout key is
// ReadKeyPrefix + ":" + f + ":rwlock_timeout:" + n.
func ReadKeyPrefix(name string) string {
	if strings.Contains(name, "{") {
		return name
	}
	return "{" + name + "}"
}
