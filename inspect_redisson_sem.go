package holdfast

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/scripts"
)

// Inspect and ForceUnlock of a semaphore under LayoutRedisson: NAME is a
// string (the free count) beside the lease records {NAME}:timeout, as
// Redisson keeps an RPermitExpirableSemaphore, whoever holds its permits.

var (
	redissonSemInspectScript      = rueidis.NewLuaScript(scripts.RedissonSemInspect)
	redissonSemForceUnlockScript  = rueidis.NewLuaScript(scripts.RedissonSemForceUnlock)
	redissonSemForceUnlockSharded = rueidis.NewLuaScript(scripts.Sharded(scripts.RedissonSemForceUnlock))
)

// inspectRedissonSem reads NAME as a Redisson semaphore: its size, one
// Holder per permit whose lease has not ended (Owner is the permit id in
// hex, as Redisson's API shows ids; Count 1, since Redis keeps no reentry
// count), and the longest lease left (-1 when a permit has none). It
// reports false when the keys are not a semaphore's.
func inspectRedissonSem(ctx context.Context, rdb rueidis.Client, name string, info *Info) (bool, error) {
	keys := scripts.RedissonSemKeys(name)[:2]
	reply, err := redissonSemInspectScript.Exec(ctx, rdb, keys, nil).ToArray()
	if err != nil {
		return false, err
	}
	size, err := replyInt(reply, 0)
	if err != nil || (size == -3 && len(reply) == 1) {
		return false, err
	}
	if len(reply)%2 != 1 {
		return false, fmt.Errorf("redisson_sem_inspect script: %d values", len(reply))
	}
	info.Kind, info.Permits = KindSemaphore, int(size)
	for i := 1; i < len(reply); i += 2 {
		id, err1 := reply[i].ToString()
		left, err2 := reply[i+1].AsInt64()
		if err1 != nil || err2 != nil {
			return false, fmt.Errorf("redisson_sem_inspect script: permit %d malformed", i/2)
		}
		info.Holders = append(info.Holders, Holder{Owner: id, Count: 1})
		switch {
		case left < 0:
			info.TTL = -1
		case info.TTL >= 0 && time.Duration(left)*time.Millisecond > info.TTL:
			info.TTL = time.Duration(left) * time.Millisecond
		}
	}
	sort.Slice(info.Holders, func(i, j int) bool { return info.Holders[i].Owner < info.Holders[j].Owner })
	return true, nil
}

// forceUnlockRedissonSem gives back every permit of NAME when its keys are
// a Redisson semaphore's, and publishes the new free count as a release
// does. There is no fence to raise: Redisson keeps none for the kind.
func forceUnlockRedissonSem(ctx context.Context, rdb rueidis.Client, name string) (bool, error) {
	script := redissonSemForceUnlockScript
	if rdb.Mode() == rueidis.ClientModeCluster {
		script = redissonSemForceUnlockSharded
	}
	n, err := script.Exec(ctx, rdb, scripts.RedissonSemKeys(name), nil).AsInt64()
	return n == 1, err
}

// redissonSemNames adds to seen the names matching pattern that are Redisson
// semaphores with a permit held now: it scans for their lease records
// ({NAME}:timeout, or NAME:timeout for a NAME holding '{') and reads each.
func redissonSemNames(ctx context.Context, rdb rueidis.Client, pattern string, seen map[string]bool) error {
	var candidates []string
	add := func(_ rueidis.Client, key string) {
		if inner, ok := strings.CutPrefix(key, "{"); ok {
			if name, ok := strings.CutSuffix(inner, "}:timeout"); ok && scripts.RedissonSemLeaseKey(name) == key {
				candidates = append(candidates, name)
			}
		}
		if name, ok := strings.CutSuffix(key, ":timeout"); ok && scripts.RedissonSemLeaseKey(name) == key {
			candidates = append(candidates, name)
		}
	}
	for _, match := range []string{"{" + pattern + "}:timeout", pattern + ":timeout"} {
		if err := scanNodes(ctx, rdb, match, "zset", add); err != nil {
			return err
		}
	}
	for _, name := range candidates {
		if seen[name] {
			continue
		}
		var info Info
		sem, err := inspectRedissonSem(ctx, rdb, name, &info)
		if err != nil {
			return fmt.Errorf("holdfast: reading %q: %w", name, err)
		}
		if sem && len(info.Holders) > 0 {
			seen[name] = true
		}
	}
	return nil
}
