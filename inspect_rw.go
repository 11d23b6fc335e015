package holdfast

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/scripts"
)

// KindRW is Info.Kind of a name in use as a read-write lock (ReadLock,
// WriteLock).
const KindRW = "rw"

var (
	rwInspectScript      = rueidis.NewLuaScript(scripts.RWInspect)
	rwForceUnlockScript  = rueidis.NewLuaScript(scripts.RWForceUnlock)
	rwForceUnlockSharded = rueidis.NewLuaScript(scripts.Sharded(scripts.RWForceUnlock))
)

// inspectRW reads a read-write lock: its live read and write holds (Mode
// "read" or "write"), the hash's TTL (the longest live lease), and its
// waiting writers' claims as Waiters (waiting readers keep nothing in Redis).
func inspectRW(ctx context.Context, rdb rueidis.Client, name string, info *Info) (bool, error) {
	reply, err := rwInspectScript.Exec(ctx, rdb, []string{scripts.LockKey(name)}, nil).ToArray()
	if err != nil {
		return false, err
	}
	if len(reply) == 0 || len(reply)%2 != 1 {
		return false, fmt.Errorf("rw_inspect script: reply of %d elements", len(reply))
	}
	pttl, err := reply[0].AsInt64()
	if err != nil {
		return false, fmt.Errorf("rw_inspect script: %w", err)
	}
	if pttl == -3 && len(reply) == 1 {
		return false, nil // not a read-write lock
	}
	var holders []Holder
	waiters := 0
	for i := 1; i < len(reply); i += 2 {
		field, err1 := reply[i].ToString()
		count, err2 := reply[i+1].ToString()
		if err1 != nil || err2 != nil {
			return false, fmt.Errorf("rw_inspect script: bad field at %d", i)
		}
		if n := len(field); n > 2 && field[n-2:] == ":c" {
			waiters++
			continue
		}
		m, owner, ok := scripts.RWModeOf(field)
		if !ok {
			return false, fmt.Errorf("rw_inspect script: field %q is not a hold", field)
		}
		c, err := strconv.ParseInt(count, 10, 64)
		if err != nil {
			return false, fmt.Errorf("rw_inspect script: hold %q has count %q", field, count)
		}
		holders = append(holders, Holder{Owner: owner, Count: c, Mode: m.String()})
	}
	if len(holders) == 0 && waiters == 0 {
		return false, nil
	}
	sort.Slice(holders, func(i, j int) bool {
		if holders[i].Owner != holders[j].Owner {
			return holders[i].Owner < holders[j].Owner
		}
		return holders[i].Mode < holders[j].Mode
	})
	info.Holders, info.Waiters, info.TTL = holders, waiters, ttlOf(pttl)
	return true, nil
}

// forceUnlockRW frees a read-write lock: every hold and claim, fence raised,
// waiters told.
func forceUnlockRW(ctx context.Context, _ *Client, rdb rueidis.Client, name string) (bool, error) {
	keys := scripts.GrantKeys(name)
	script := rwForceUnlockScript
	if rdb.Mode() == rueidis.ClientModeCluster {
		// On a cluster waiters SSUBSCRIBE: the variant that SPUBLISHes.
		script = rwForceUnlockSharded
	}
	n, err := script.Exec(ctx, rdb, keys, []string{scripts.Channel(name)}).AsInt64()
	return n == 1, err
}
