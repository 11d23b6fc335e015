package scripts

import (
	_ "embed"
	"strconv"
	"time"
)

// The read-write kind's scripts. Layout, arguments and replies are documented
// at the top of rw_acquire.lua; in short, the name's lock hash carries
// kind=rw and one field per read hold, write hold and waiting writer's claim,
// each with a lease key of its own (RWLeaseKey) in the same hash slot.
var (
	//go:embed rw_acquire.lua
	rwAcquireBody string
	//go:embed rw_release.lua
	RWRelease string
	//go:embed rw_renew.lua
	RWRenew string
	//go:embed rw_keepalive.lua
	RWKeepAlive string
	// The operator's tools for the kind (Client.Inspect, Client.ForceUnlock).
	//go:embed rw_inspect.lua
	RWInspect string
	//go:embed rw_force_unlock.lua
	rwForceUnlockBody string
)

// The read-write scripts that take a fencing token, with fence.lua in front.
var (
	RWAcquire     = WithFence(rwAcquireBody)
	RWForceUnlock = WithFence(rwForceUnlockBody)
)

// The read-write kind's scripts, registered for the runtimes.
var (
	RWAcquireScript   = NewScript("rw_acquire", RWAcquire)
	RWReleaseScript   = noSync(NewScript("rw_release", RWRelease))
	RWRenewScript     = withHoldKey(renews(NewScript("rw_renew", RWRenew)), RWLeaseKey)
	RWKeepAliveScript = keepsAlive(NewScript("rw_keepalive", RWKeepAlive))
)

// RWMode is the mode of a read-write hold.
type RWMode byte

// Modes of a read-write hold, as the scripts spell them.
const (
	RWRead  RWMode = 'r'
	RWWrite RWMode = 'w'
)

func (m RWMode) String() string {
	switch m {
	case RWRead:
		return "read"
	case RWWrite:
		return "write"
	}
	return "RWMode(" + strconv.Itoa(int(m)) + ")"
}

// RWWouldDeadlock is rw_acquire.lua's reply code for a read holder asking
// for a fresh write hold. Its other codes are acquire.lua's (AcquireGranted,
// AcquireHeld, AcquireMismatch, AcquireWrongKind).
const RWWouldDeadlock = -3

// RWField is the hold field of the owner field ownerField's hold in mode m:
// "CLIENTID:INSTANCE:OWNER:r" or "CLIENTID:INSTANCE:OWNER:w". It names the hold in the lock
// hash, in its lease key and in rw_renew's arguments; a read-write Request's
// Field is its hold field.
func RWField(m RWMode, ownerField string) string { return ownerField + ":" + string(m) }

// RWModeOf returns the mode and the owner field of a hold field made by
// RWField, or false.
func RWModeOf(holdField string) (m RWMode, ownerField string, ok bool) {
	n := len(holdField)
	if n < 3 || holdField[n-2] != ':' {
		return 0, "", false
	}
	switch m := RWMode(holdField[n-1]); m {
	case RWRead, RWWrite:
		return m, holdField[:n-2], true
	}
	return 0, "", false
}

// withHoldKey sets s.HoldKey to k and returns s.
func withHoldKey(s *Script, k func(name, field string) string) *Script {
	s.HoldKey = k
	return s
}

// RWLeaseKey is the key whose TTL is the lease of the hold holdField on name;
// its value is the hold's fencing token.
func RWLeaseKey(name, holdField string) string { return LockKey(name) + ":rw:" + holdField }

// RWAcquireCall builds the keys and arguments of rw_acquire.lua for the hold
// holdField. claim is the waiting writer's claim lease (0: leave no claim).
func RWAcquireCall(name, holdField string, lease time.Duration, expected int64, claim time.Duration) (keys, args []string) {
	c := "0"
	if claim > 0 {
		c = Millis(claim)
	}
	return []string{RWLeaseKey(name, holdField), LockKey(name), FenceKey(name), FairQueueKey(name)},
		[]string{holdField, Millis(lease), strconv.FormatInt(expected, 10), c}
}

// RWReleaseCall builds the keys and arguments of rw_release.lua.
func RWReleaseCall(name, holdField string, expected int64) (keys, args []string) {
	return []string{RWLeaseKey(name, holdField), LockKey(name)},
		[]string{holdField, strconv.FormatInt(expected, 10), Channel(name)}
}
