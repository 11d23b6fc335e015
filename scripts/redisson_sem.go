package scripts

import (
	_ "embed"
	"encoding/hex"
	"hash/fnv"
	"strconv"
	"time"
)

// The semaphore under the Redisson layout: Redisson's
// RPermitExpirableSemaphore, whose keys are
//
//	NAME                 string: the count of free permits (trySetPermits sets it)
//	{NAME}:timeout       sorted set: permit id (16 bytes) -> end of its lease, Unix ms
//	redisson_sc:{NAME}   channel: the free count after a release or a take-back
//
// The semaphore's size is the free count plus the lease records. Scripts'
// headers (redisson_sem_acquire.lua) give the protocol.
var (
	//go:embed redisson_sem_acquire.lua
	RedissonSemAcquire string
	//go:embed redisson_sem_release.lua
	RedissonSemRelease string
	//go:embed redisson_sem_renew.lua
	RedissonSemRenew string
	// The operator's tools for the kind (Client.Inspect, Client.ForceUnlock).
	//go:embed redisson_sem_inspect.lua
	RedissonSemInspect string
	//go:embed redisson_sem_force_unlock.lua
	RedissonSemForceUnlock string
)

// The Redisson semaphore's scripts, registered for the runtimes.
var (
	RedissonSemAcquireScript = NewScript("redisson_sem_acquire", RedissonSemAcquire)
	RedissonSemReleaseScript = noSync(NewScript("redisson_sem_release", RedissonSemRelease))
	RedissonSemRenewScript   = withHoldKey(NewScript("redisson_sem_renew", RedissonSemRenew), redissonSemHoldKey)
)

// redissonSemHoldKey: a permit's lease is its record in {NAME}:timeout.
func redissonSemHoldKey(name, _ string) string { return RedissonSemLeaseKey(name) }

// RedissonSemChannel is an RPermitExpirableSemaphore's channel:
// redisson_sc:{NAME}.
func RedissonSemChannel(name string) string { return RedissonPrefix("redisson_sc", name) }

// RedissonSemLeaseKey is an RPermitExpirableSemaphore's lease records:
// {NAME}:timeout.
func RedissonSemLeaseKey(name string) string { return RedissonSuffix(name, "timeout") }

// RedissonPermitID is the permit id of an owner field under the Redisson
// layout, in the 32 hex digits Redisson's API shows its ids in: the 128-bit
// FNV-1a hash of the field. Redisson draws 16 random bytes per permit; a
// holdfast owner keeps one permit, so its id is made from the field, which
// names the owner uniquely, and the same owner's calls meet the same id.
func RedissonPermitID(field string) string {
	h := fnv.New128a()
	h.Write([]byte(field))
	var sum [16]byte
	return hex.EncodeToString(h.Sum(sum[:0]))
}

// RedissonSemKeys are the KEYS of redisson_sem_acquire.lua and
// redisson_sem_release.lua.
func RedissonSemKeys(name string) []string {
	return []string{name, RedissonSemLeaseKey(name), RedissonSemChannel(name)}
}

// RedissonSemAcquireArgs are the ARGV of redisson_sem_acquire.lua.
func RedissonSemAcquireArgs(permitID string, lease time.Duration, expected int64, permits int) []string {
	return []string{permitID, Millis(lease), strconv.FormatInt(expected, 10), strconv.Itoa(permits)}
}

// RedissonSemReleaseArgs are the ARGV of redisson_sem_release.lua.
func RedissonSemReleaseArgs(permitID string, expected int64) []string {
	return []string{permitID, strconv.FormatInt(expected, 10)}
}
