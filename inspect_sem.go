package holdfast

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/scripts"
)

// KindSemaphore is Info.Kind of a name in use as a semaphore (Semaphore).
const KindSemaphore = "semaphore"

var (
	semInspectScript      = rueidis.NewLuaScript(scripts.SemInspect)
	semForceUnlockScript  = rueidis.NewLuaScript(scripts.SemForceUnlock)
	semForceUnlockSharded = rueidis.NewLuaScript(scripts.Sharded(scripts.SemForceUnlock))
)

// inspectSem reads a semaphore: its permit count, one Holder per live permit
// and the hash's TTL (the longest live lease). Waiters keep nothing in Redis.
func inspectSem(ctx context.Context, rdb rueidis.Client, name string, info *Info) (bool, error) {
	reply, err := semInspectScript.Exec(ctx, rdb, []string{scripts.LockKey(name)}, nil).ToArray()
	if err != nil {
		return false, err
	}
	pttl, err := replyInt(reply, 0)
	if err != nil || (pttl == -3 && len(reply) == 1) {
		return false, err
	}
	permits, err := replyInt(reply, 1)
	if err != nil {
		return false, fmt.Errorf("sem_inspect script: %w", err)
	}
	holders, err := decodeHolders(reply[2:])
	if err != nil || len(holders) == 0 {
		return false, err
	}
	info.Holders, info.Permits, info.TTL = holders, int(permits), ttlOf(pttl)
	return true, nil
}

// forceUnlockSem frees every permit of a semaphore, raises the fence and
// wakes its waiters.
func forceUnlockSem(ctx context.Context, _ *Client, rdb rueidis.Client, name string) (bool, error) {
	script := semForceUnlockScript
	if rdb.Mode() == rueidis.ClientModeCluster {
		script = semForceUnlockSharded
	}
	n, err := script.Exec(ctx, rdb, scripts.GrantKeys(name), []string{scripts.Channel(name)}).AsInt64()
	return n == 1, err
}
