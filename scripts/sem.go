package scripts

import (
	_ "embed"
	"strconv"
	"time"
)

// The semaphore's scripts. Layout, arguments and replies are documented at
// the top of sem_acquire.lua; in short, the name's lock hash carries
// kind=semaphore, the permit count, and one field per held permit, each
// with a lease key of its own (SemLeaseKey) in the same hash slot.
var (
	//go:embed sem_acquire.lua
	semAcquireBody string
	//go:embed sem_release.lua
	SemRelease string
	//go:embed sem_renew.lua
	SemRenew string
	// The operator's tools for the kind (Client.Inspect, Client.ForceUnlock).
	//go:embed sem_inspect.lua
	SemInspect string
	//go:embed sem_force_unlock.lua
	semForceUnlockBody string
)

// The semaphore scripts that take a fencing token, with fence.lua in front.
var (
	SemAcquire     = WithFence(semAcquireBody)
	SemForceUnlock = WithFence(semForceUnlockBody)
)

// The semaphore's scripts, registered for the runtimes.
var (
	SemAcquireScript = NewScript("sem_acquire", SemAcquire)
	SemReleaseScript = noSync(NewScript("sem_release", SemRelease))
	SemRenewScript   = withHoldKey(renews(NewScript("sem_renew", SemRenew)), SemLeaseKey)
)

// SemPermits is sem_acquire.lua's reply code for a name in use as a
// semaphore of another permit count (the count follows it). Its other codes
// are acquire.lua's (AcquireGranted, AcquireHeld, AcquireMismatch,
// AcquireWrongKind).
const SemPermits = -4

// SemLeaseKey is the key whose TTL is the lease of the permit owner field
// holds on name; its value is the permit's fencing token.
func SemLeaseKey(name, field string) string { return LockKey(name) + ":sem:" + field }

// SemAcquireCall builds the keys and arguments of sem_acquire.lua.
func SemAcquireCall(name, field string, lease time.Duration, expected int64, permits int) (keys, args []string) {
	return []string{SemLeaseKey(name, field), LockKey(name), FenceKey(name), FairQueueKey(name)},
		[]string{field, Millis(lease), strconv.FormatInt(expected, 10), strconv.Itoa(permits)}
}

// SemReleaseCall builds the keys and arguments of sem_release.lua.
func SemReleaseCall(name, field string, expected int64) (keys, args []string) {
	return []string{SemLeaseKey(name, field), LockKey(name)},
		[]string{field, strconv.FormatInt(expected, 10), Channel(name)}
}
