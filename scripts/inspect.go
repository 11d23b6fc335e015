package scripts

import (
	_ "embed"
	"strings"
)

// Lua sources of the operator's tools (Client.Inspect and Client.ForceUnlock),
// one pair per lock kind. The fair kind's run after fair_common.lua.
var (
	//go:embed inspect.lua
	Inspect string
	//go:embed force_unlock.lua
	forceUnlockBody string

	//go:embed fair_inspect.lua
	fairInspect string
	//go:embed fair_force_unlock.lua
	fairForceUnlock string

	FairInspect     = fairCommon + fairInspect
	FairForceUnlock = WithFence(fairCommon + fairForceUnlock)
)

// ForceUnlock takes a token to raise the fence: fence.lua goes in front.
var ForceUnlock = WithFence(forceUnlockBody)

// lockKeyPrefix and lockKeySuffix frame the name in LockKey.
const (
	lockKeyPrefix = "holdfast:{"
	lockKeySuffix = "}"
)

// LockKeyPattern is the SCAN MATCH pattern of the lock keys whose names match
// the glob pattern (Redis glob syntax). The keys of a lock's other parts end
// after the closing brace (":fence", ":ch"), so they never match.
func LockKeyPattern(pattern string) string { return lockKeyPrefix + pattern + lockKeySuffix }

// NameOfLockKey returns the lock name of a key made by LockKey, or false.
func NameOfLockKey(key string) (string, bool) {
	if !strings.HasPrefix(key, lockKeyPrefix) || !strings.HasSuffix(key, lockKeySuffix) ||
		len(key) <= len(lockKeyPrefix)+len(lockKeySuffix) {
		return "", false
	}
	name := key[len(lockKeyPrefix) : len(key)-len(lockKeySuffix)]
	if ValidateName(name) != nil {
		return "", false
	}
	return name, true
}
