package lockactor

import (
	"sync"

	"github.com/holdfast/holdfast/scripts"
)

// RedissonSemaphore returns the kind of a semaphore of permits permits
// under the Redisson layout (Client.Semaphore with holdfast.LayoutRedisson):
// Redisson's RPermitExpirableSemaphore, so that Go and Java holders of a
// name together never hold more than its permits. Its scripts are
// redisson_sem_*.lua, whose headers give the protocol.
//
// A hold's field is its permit id (scripts.RedissonPermitID of the owner
// field), which Redisson's lease records carry; Redis keeps no reentry
// count or token beside them, so Token is 0 for every permit: Java holders
// take no token, and one counted for the Go holders only would fence them
// against each other but not against Java's writes. As for Semaphore, the
// permit count is part of the kind (a machine serves one count; another
// ends with ErrPermits), and the count must be the one Redis keeps.
func RedissonSemaphore(permits int) *Kind {
	if k, ok := redissonSemKinds.Load(permits); ok {
		return k.(*Kind)
	}
	k, _ := redissonSemKinds.LoadOrStore(permits, newRedissonSemaphore(permits))
	return k.(*Kind)
}

// redissonSemKinds holds one Kind per permit count (kinds compare by
// identity).
var redissonSemKinds sync.Map

func newRedissonSemaphore(permits int) *Kind {
	return &Kind{
		Name:    SemaphoreName,
		Permits: permits,
		HoldField: func(ownerField string, _ uint8) string {
			return scripts.RedissonPermitID(ownerField)
		},
		Acquire: func(env Env, r *Request, expected int64) scripts.Call {
			return scripts.Call{
				Script: scripts.RedissonSemAcquireScript,
				Keys:   scripts.RedissonSemKeys(env.Name),
				Args:   scripts.RedissonSemAcquireArgs(r.Field, r.Lease, expected, permits),
			}
		},
		DecodeAcquire: decodeSemAcquire,
		Release: func(env Env, field string, expected int64) scripts.Call {
			return scripts.Call{
				Script: scripts.RedissonSemReleaseScript,
				Keys:   scripts.RedissonSemKeys(env.Name),
				Args:   scripts.RedissonSemReleaseArgs(field, expected),
			}
		},
		DecodeRelease: decodeInt,
		Renew:         scripts.RedissonSemRenewScript,
		RenewKey:      scripts.RedissonSemLeaseKey,
		Channel: func(name, _ string) string {
			return scripts.RedissonSemChannel(name)
		},
		MayAttempt: func(_ *Request, holds func(yield func(Hold) bool)) bool {
			n := 0
			for range holds {
				n++
			}
			return n < permits
		},
		YieldAfterRelease: true,
	}
}
