package holdfast

import (
	"context"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/scripts"
)

// Inspect and ForceUnlock of a fair lock under LayoutRedisson: Redisson's
// RFairLock is an RLock's hash beside a line of waiters
// (redisson_lock_queue:{NAME}) and their deadlines; a name with a line is
// a fair lock, held or only queued for.

var (
	redissonFairInspectScript = rueidis.NewLuaScript(scripts.RedissonFairInspect)
	redissonFairWakeScript    = rueidis.NewLuaScript(scripts.RedissonFairWake)
	redissonFairWakeSharded   = rueidis.NewLuaScript(scripts.Sharded(scripts.RedissonFairWake))
)

// inspectRedissonFair completes info, read by inspectRedisson with outcome
// err, with the fair line of name: its live waiters, and KindFair.
func inspectRedissonFair(ctx context.Context, rdb rueidis.Client, name string, info *Info, err error) error {
	if err != nil || info.Kind == KindRW {
		return err
	}
	keys := []string{scripts.RedissonFairQueueKey(name), scripts.RedissonFairTimeoutKey(name)}
	n, err := redissonFairInspectScript.Exec(ctx, rdb, keys, nil).AsInt64()
	if err != nil || n < 0 {
		return err
	}
	info.Kind, info.Waiters = KindFair, int(n)
	return nil
}

// wakeRedissonFair tells the head of name's fair line, if any, that the
// lock is free, as RFairLock.forceUnlock does.
func wakeRedissonFair(ctx context.Context, rdb rueidis.Client, name string) error {
	script := redissonFairWakeScript
	if rdb.Mode() == rueidis.ClientModeCluster {
		script = redissonFairWakeSharded
	}
	return script.Exec(ctx, rdb, scripts.RedissonFairWakeKeys(name), nil).Error()
}
