package lockactor

import (
	"fmt"
	"sync"

	"github.com/holdfast/holdfast/scripts"
)

// Semaphore returns the kind of a semaphore of permits permits
// (Client.Semaphore): at most permits owners hold the name at once, each
// with a permit of its own lease, token and reentry count. Its scripts are
// sem_acquire.lua, sem_release.lua and sem_renew.lua, whose headers give the
// protocol. The permit count is part of the kind: a machine serves requests
// of one count at a time, and one of another count ends with ErrPermits, as
// Redis would refuse it. permits must be at least 1.
//
// Policy: waiters keep nothing in Redis; the head of the local queue tries
// while this client holds fewer than permits permits (with that many, Redis
// would refuse it), and after a release the local waiters wait for its
// announcement like the other processes' (YieldAfterRelease). A release
// publishes once, so every process that waits sends one attempt.
func Semaphore(permits int) *Kind {
	if k, ok := semKinds.Load(permits); ok {
		return k.(*Kind)
	}
	k, _ := semKinds.LoadOrStore(permits, newSemaphore(permits))
	return k.(*Kind)
}

// semKinds holds one Kind per permit count, so that requests of one count
// share a kind (the machine compares kinds by identity).
var semKinds sync.Map

// SemaphoreName is the Name of every semaphore kind.
const SemaphoreName = "semaphore"

func newSemaphore(permits int) *Kind {
	return &Kind{
		Name:    SemaphoreName,
		Permits: permits,
		Acquire: func(env Env, r *Request, expected int64) scripts.Call {
			keys, args := scripts.SemAcquireCall(env.Name, r.Field, r.Lease, expected, permits)
			return scripts.Call{Script: scripts.SemAcquireScript, Keys: keys, Args: args}
		},
		DecodeAcquire: decodeSemAcquire,
		HoldToken:     true,
		Release: func(env Env, field string, expected int64) scripts.Call {
			keys, args := scripts.SemReleaseCall(env.Name, field, expected)
			return scripts.Call{Script: scripts.SemReleaseScript, Keys: keys, Args: args}
		},
		DecodeRelease: decodeInt,
		Renew:         scripts.SemRenewScript,
		Channel: func(name, _ string) string {
			return scripts.Channel(name)
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

// decodeSemAcquire decodes sem_acquire.lua's reply: acquire.lua's codes,
// plus SemPermits.
func decodeSemAcquire(vals []int64) (AcquireResult, error) {
	if len(vals) == 2 && vals[0] == scripts.SemPermits {
		return AcquireResult{Code: Refused, Err: fmt.Errorf("%w: it has %d permits", ErrPermits, vals[1])}, nil
	}
	return DecodeAcquire(vals)
}
