package scripts

import (
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// The election's scripts (Client.Elect, Leader, Observe). Layout, arguments
// and replies are documented at the top of elect_acquire.lua; in short, the
// name's lock hash holdfast:{NAME} carries kind=election and the leader's
// owner field, reentry count, value and term while someone leads, and the
// name's channel is told every grant and resignation.
var (
	//go:embed elect_acquire.lua
	electAcquireBody string
	//go:embed elect_release.lua
	ElectRelease string
	//go:embed elect_renew.lua
	ElectRenew string
	// ElectRead reads the leader (Client.Leader, Observe, Inspect).
	//go:embed elect_read.lua
	ElectRead string
	//go:embed elect_force_unlock.lua
	electForceUnlockBody string
)

// The election scripts that take a fencing token, with fence.lua in front.
var (
	ElectAcquire     = WithFence(electAcquireBody)
	ElectForceUnlock = WithFence(electForceUnlockBody)
)

// The election's scripts, registered for the runtimes.
var (
	ElectAcquireScript = NewScript("elect_acquire", ElectAcquire)
	ElectReleaseScript = noSync(NewScript("elect_release", ElectRelease))
	ElectRenewScript   = renews(NewScript("elect_renew", ElectRenew))
)

// ElectionKind is the kind marker of an election's hash, and its Info.Kind.
const ElectionKind = "election"

// MaxValueLen is the longest value a candidate may announce, in bytes. A
// value travels in every grant's message and every read of the leader: it
// is meant for an address or a host name, not a payload.
const MaxValueLen = 4096

// ErrInvalidValue is wrapped by the errors of ValidateValue.
var ErrInvalidValue = errors.New("holdfast: invalid election value")

// ValidateValue reports whether value can be announced by a candidate:
// non-empty (a Leader with an empty Value means nobody leads) and at most
// MaxValueLen bytes. Any bytes are allowed.
func ValidateValue(value string) error {
	switch {
	case value == "":
		return fmt.Errorf("%w: empty", ErrInvalidValue)
	case len(value) > MaxValueLen:
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidValue, len(value), MaxValueLen)
	}
	return nil
}

// ElectAcquireCall builds the keys and arguments of elect_acquire.lua.
func ElectAcquireCall(name, field string, lease time.Duration, expected int64, value string) (keys, args []string) {
	return []string{LockKey(name), FenceKey(name), FairQueueKey(name)},
		[]string{field, Millis(lease), strconv.FormatInt(expected, 10), value, Channel(name)}
}

// ElectReleaseCall builds the keys and arguments of elect_release.lua.
func ElectReleaseCall(name, field string, expected int64) (keys, args []string) {
	return []string{LockKey(name)}, []string{field, strconv.FormatInt(expected, 10), Channel(name)}
}

// ElectReadKeys are the keys of elect_read.lua.
func ElectReadKeys(name string) []string { return []string{LockKey(name), FairQueueKey(name)} }

// ElectForceUnlockCall builds the keys and arguments of elect_force_unlock.lua.
func ElectForceUnlockCall(name string) (keys, args []string) {
	return GrantKeys(name), []string{Channel(name)}
}
