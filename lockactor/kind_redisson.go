package lockactor

import (
	"strconv"

	"github.com/holdfast/holdfast/scripts"
)

// The kinds of the Redisson layout (holdfast.LayoutRedisson): Redisson's
// RLock/RFencedLock and RReadWriteLock keys, fields, channels and messages,
// so that a Go holder and a Java holder of a name exclude and wake each
// other. Their scripts are redisson_*.lua, whose headers give the protocol.
// What Redisson's keys cannot carry is off: no local handoff (a Java waiter
// would not hear of it), no waiter marks (every release that frees the name
// publishes, as Redisson's does), no writer claims (Java would not honour
// them). Fields are Redisson's ID:THREAD (scripts.RedissonField).

// RedissonLock is the reentrant lock (Client.Lock) under the Redisson
// layout: an RLock (and RFencedLock: tokens come from its counter).
var RedissonLock = &Kind{
	Name: Reentrant.Name,
	Acquire: func(env Env, r *Request, expected int64) scripts.Call {
		return scripts.Call{
			Script: scripts.RedissonAcquireScript,
			Keys:   env.redissonKeys().acquire,
			Args:   r.args.use(r.Field, scripts.Millis(r.Lease), strconv.FormatInt(expected, 10)),
		}
	},
	DecodeAcquire: DecodeAcquire,
	Release: func(env Env, field string, expected int64) scripts.Call {
		return scripts.Call{
			Script: scripts.RedissonReleaseScript,
			Keys:   env.redissonKeys().release,
			Args:   env.args.use(field, strconv.FormatInt(expected, 10)),
		}
	},
	DecodeRelease: decodeInt,
	Renew:         scripts.RedissonRenewScript,
	RenewKey:      redissonKey,
	Channel: func(name, _ string) string {
		return scripts.RedissonLockChannel(name)
	},
	YieldAfterRelease: true,
}

// RedissonRW is the read-write lock (Client.ReadLock, WriteLock) under the
// Redisson layout: an RReadWriteLock. A read hold's field is the owner's
// ID:THREAD, a write hold's ID:THREAD:write. Readers share, a writer
// excludes every other owner; a write request of an owner holding a read
// hold is refused with ErrWouldDeadlock, and the owner of the write hold may
// read (write → read), as in Redisson.
var RedissonRW = &Kind{
	Name: ReadWrite.Name,
	HoldField: func(ownerField string, mode uint8) string {
		if mode == ModeWrite {
			return ownerField + scripts.RedissonWriteSuffix
		}
		return ownerField
	},
	Acquire: func(env Env, r *Request, expected int64) scripts.Call {
		keys, args := scripts.RedissonRWAcquireCall(env.Name, r.Field, r.Lease, expected)
		return scripts.Call{Script: scripts.RedissonRWAcquireScript, Keys: keys, Args: args}
	},
	DecodeAcquire: decodeRWAcquire,
	Release: func(env Env, field string, expected int64) scripts.Call {
		keys, args := scripts.RedissonRWReleaseCall(env.Name, field, expected)
		return scripts.Call{Script: scripts.RedissonRWReleaseScript, Keys: keys, Args: args}
	},
	DecodeRelease: decodeInt,
	Renew:         scripts.RedissonRWRenewScript,
	RenewKey:      redissonKey,
	Channel: func(name, _ string) string {
		return scripts.RedissonRWChannel(name)
	},
	MayAttempt:        redissonRWMayAttempt,
	Jump:              redissonRWJump,
	YieldAfterRelease: true,
}

func redissonKey(name string) string { return name }

// redissonRWMayAttempt: a reader tries unless another owner of this client
// holds the write lock; a writer only when no other owner of this client
// holds anything (Redisson grants a writer a free name only).
func redissonRWMayAttempt(head *Request, holds func(yield func(Hold) bool)) bool {
	me, write := scripts.RedissonRWMode(head.Field)
	for h := range holds {
		o, w := scripts.RedissonRWMode(h.Field)
		if o != me && (write || w) {
			return false
		}
	}
	return true
}

// redissonRWJump: a read request of an owner holding the write lock goes
// first (Redisson grants it whatever waits).
func redissonRWJump(r *Request, holds func(yield func(Hold) bool)) bool {
	me, write := scripts.RedissonRWMode(r.Field)
	if write {
		return false
	}
	for h := range holds {
		if o, w := scripts.RedissonRWMode(h.Field); w && o == me {
			return true
		}
	}
	return false
}

// redissonKeys are RedissonLock's KEYS for one name, made at the machine's
// first call of that kind and kept with its other keys, so that a cycle
// does not build the token key and channel strings again.
type redissonKeys struct {
	acquire []string // redisson_acquire.lua: the hash, the token counter
	release []string // redisson_release.lua: the hash, the channel

	acquireKeys, releaseKeys [2]string
}

// redissonKeys returns the machine's RedissonLock keys, or builds them for
// an Env made elsewhere.
func (env Env) redissonKeys() *redissonKeys {
	if env.keys != nil && env.keys.redisson != nil {
		return env.keys.redisson
	}
	rk := &redissonKeys{
		acquireKeys: [2]string(scripts.RedissonAcquireKeys(env.Name)),
		releaseKeys: [2]string(scripts.RedissonReleaseKeys(env.Name)),
	}
	rk.acquire = rk.acquireKeys[:len(rk.acquireKeys):len(rk.acquireKeys)]
	rk.release = rk.releaseKeys[:len(rk.releaseKeys):len(rk.releaseKeys)]
	if env.keys != nil {
		env.keys.redisson = rk
	}
	return rk
}
