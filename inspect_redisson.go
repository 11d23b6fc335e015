package holdfast

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/scripts"
)

// Inspect, ForceUnlock and Names under LayoutRedisson: a name is a lock
// when the key NAME is a hash of Redisson's shape (RLock: ID:THREAD fields;
// RReadWriteLock: a mode field beside them), whoever holds it, Java or Go.

var (
	redissonInspectScript      = rueidis.NewLuaScript(scripts.RedissonInspect)
	redissonForceUnlockScript  = rueidis.NewLuaScript(scripts.RedissonForceUnlock)
	redissonForceUnlockSharded = rueidis.NewLuaScript(scripts.Sharded(scripts.RedissonForceUnlock))
	redissonFenceRaiseScript   = rueidis.NewLuaScript(scripts.RedissonFenceRaise)
	// redissonField is the shape of a Redisson holder field: ID:THREAD,
	// ID:THREAD:write.
	redissonField = regexp.MustCompile(`^[^:]+:[0-9]+(:write)?$`)
)

var errRedissonInspectReply = errors.New("redisson_inspect script: malformed reply")

// inspectRedisson reads NAME as Redisson keeps an RLock or RReadWriteLock.
func (c *Client) inspectRedisson(ctx context.Context, rdb rueidis.Client, name string, info *Info) (err error) {
	if sem, err := inspectRedissonSem(ctx, rdb, name, info); sem || err != nil {
		return err
	}
	defer func() { err = inspectRedissonFair(ctx, rdb, name, info, err) }()
	reply, err := redissonInspectScript.Exec(ctx, rdb, []string{name}, nil).ToArray()
	if err != nil {
		return err
	}
	pttl, err := replyInt(reply, 0)
	if err != nil {
		return err
	}
	if pttl == -2 && len(reply) == 1 {
		return nil // no such hash: free
	}
	if len(reply) < 2 || len(reply)%2 != 0 {
		return errRedissonInspectReply
	}
	mode, err := reply[1].ToString()
	if err != nil {
		return errRedissonInspectReply
	}
	for i := 2; i < len(reply); i += 2 {
		field, err1 := reply[i].ToString()
		count, err2 := reply[i+1].ToString()
		n, err3 := strconv.ParseInt(count, 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || !redissonField.MatchString(field) {
			return fmt.Errorf("key %q is a hash but not a Redisson lock (field %q)", name, field)
		}
		h := Holder{Owner: field, Count: n}
		if mode != "" {
			owner, write := scripts.RedissonRWMode(field)
			h.Owner, h.Mode = owner, "read"
			if write {
				h.Mode = "write"
			}
		}
		info.Holders = append(info.Holders, h)
	}
	sort.Slice(info.Holders, func(i, j int) bool {
		a, b := info.Holders[i], info.Holders[j]
		return a.Owner < b.Owner || a.Owner == b.Owner && a.Mode < b.Mode
	})
	info.Kind, info.TTL = KindLock, ttlOf(pttl)
	if mode != "" {
		info.Kind = KindRW
	}
	return nil
}

// readRedissonFence reads RFencedLock's counter of name.
func readRedissonFence(ctx context.Context, rdb rueidis.Client, name string) (uint64, error) {
	s, err := rdb.Do(ctx, rdb.B().Get().Key(scripts.RedissonTokenKey(name)).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(s, 10, 64)
}

// forceUnlockRedisson deletes NAME's lock hash, raises its token counter and
// publishes what Redisson's forceUnlock publishes.
func forceUnlockRedisson(ctx context.Context, rdb rueidis.Client, name string) error {
	if sem, err := forceUnlockRedissonSem(ctx, rdb, name); sem || err != nil {
		return err
	}
	script := redissonForceUnlockScript
	if rdb.Mode() == rueidis.ClientModeCluster {
		script = redissonForceUnlockSharded
	}
	keys := []string{name, scripts.RedissonLockChannel(name), scripts.RedissonRWChannel(name), scripts.RedissonTokenKey(name)}
	if err := script.Exec(ctx, rdb, keys, nil).Error(); err != nil {
		return err
	}
	return wakeRedissonFair(ctx, rdb, name)
}

// redissonNames scans every node for hashes matching pattern whose fields
// have Redisson's lock shape.
func redissonNames(ctx context.Context, rdb rueidis.Client, pattern string) ([]string, error) {
	seen := map[string]bool{}
	err := scanNodes(ctx, rdb, pattern, "hash", func(node rueidis.Client, key string) {
		if seen[key] {
			return
		}
		fields, err := node.Do(ctx, node.B().Hkeys().Key(key).Build()).AsStrSlice()
		if err == nil && redissonLockFields(fields) { // else gone meanwhile, or not a lock
			seen[key] = true
		}
	})
	if err != nil {
		return nil, err
	}
	if err := redissonSemNames(ctx, rdb, pattern, seen); err != nil {
		return nil, err
	}
	return sortedNames(seen), nil
}

// redissonLockFields reports whether a hash's fields are a Redisson lock's.
func redissonLockFields(fields []string) bool {
	holders := 0
	for _, f := range fields {
		switch {
		case f == "mode":
		case redissonField.MatchString(f):
			holders++
		default:
			return false
		}
	}
	return holders > 0
}
