package holdfast

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/scripts"
)

// Info is what Redis shows of one lock name, as Inspect reads it.
type Info struct {
	// Kind is the kind the name is in use as: KindLock for the reentrant
	// lock of Client.Lock, KindFair for FairLock (held, granted, or only
	// queued for), KindRW for ReadLock/WriteLock, KindSemaphore for
	// Semaphore, KindElection for Elect (its one holder is the leader); ""
	// when the name is free.
	Kind string
	// Holders are the owners holding the name, ordered by Owner.
	Holders []Holder
	// TTL is the remaining time to live of the name's hold key: the longest
	// the hold can last without another renewal. 0 when the name is free;
	// -1 when the key has no expiry (never written so by holdfast).
	TTL time.Duration
	// Fence is the name's fencing counter: at least the token of its latest
	// grant (names of one cluster hash slot share a counter, so it may be
	// higher), and higher after a ForceUnlock. It survives the hold and is 0
	// for a slot never granted.
	Fence uint64
	// Permits is the permit count of a semaphore (KindSemaphore); 0 for
	// the other kinds.
	Permits int
	// Waiters counts the live waiters queued in Redis (the fair lock's). The
	// reentrant lock keeps no queue in Redis (waiters wait in their own
	// processes), so it is 0 there.
	Waiters int
}

// Holder is one owner holding a lock name.
type Holder struct {
	Owner string // CLIENTID:INSTANCE:OWNER as stored (scripts.Field)
	Count int64  // reentry count; 0 for a fair lock granted but not yet confirmed
	Mode  string // "read" or "write" for the read-write kind, "" otherwise
}

// Lock kinds as Info.Kind names them.
const (
	KindLock = "lock" // the reentrant lock of Client.Lock
	KindFair = "fair" // the fair lock of Client.FairLock
)

// errNoRedis answers Inspect, ForceUnlock and Names on a Client without a
// Redis client of its own (the simulator's).
var errNoRedis = fmt.Errorf("%w: Client has no Redis client to inspect with", ErrInvalidOption)

// Inspect reads what Redis shows of the lock name: its kind, holders, TTL,
// fence and queued waiters. It changes nothing. Bad input gives
// ErrInvalidName or ErrInvalidOption; a failed Redis call gives its error.
//
// The holders, kind and TTL come from one atomic read; the fence is read
// right after it, so it is at least the token of every holder shown.
func (c *Client) Inspect(ctx context.Context, name string) (Info, error) {
	rdb, err := c.inspectable(ctx)
	if err == nil {
		err = scripts.ValidateName(name)
	}
	if err != nil {
		return Info{}, err
	}
	var info Info
	if c.cfg.Layout == LayoutRedisson {
		if err := c.inspectRedisson(ctx, rdb, name, &info); err != nil {
			return Info{}, fmt.Errorf("holdfast: inspecting %q: %w", name, err)
		}
		if info.Fence, err = readRedissonFence(ctx, rdb, name); err != nil {
			return Info{}, fmt.Errorf("holdfast: inspecting %q: %w", name, err)
		}
		return info, nil
	}
	for _, k := range lockKinds {
		held, err := k.inspect(ctx, rdb, name, &info)
		if err != nil {
			return Info{}, fmt.Errorf("holdfast: inspecting %q: %w", name, err)
		}
		if held {
			info.Kind = k.kind
			break
		}
	}
	if info.Fence, err = readFence(ctx, rdb, name); err != nil {
		return Info{}, fmt.Errorf("holdfast: inspecting %q: %w", name, err)
	}
	return info, nil
}

// ForceUnlock frees the lock name whoever holds it, as an operator's last
// resort for a holder that is stuck but alive (a dead holder's hold runs out
// with its lease by itself). It deletes the hold, raises the fence so that the
// old holder's token is stale, and wakes the name's waiters (a fair lock is
// granted to its longest-waiting live waiter at once). The old holder's
// Lock ends with Lost (ErrNotOwner) at its next renewal; until then it still
// believes it holds the name, which is why its token must be fenced.
// ForceUnlock on a free name changes nothing and returns nil.
func (c *Client) ForceUnlock(ctx context.Context, name string) error {
	rdb, err := c.inspectable(ctx)
	if err == nil {
		err = scripts.ValidateName(name)
	}
	if err != nil {
		return err
	}
	if c.cfg.Layout == LayoutRedisson {
		if err := forceUnlockRedisson(ctx, rdb, name); err != nil {
			return fmt.Errorf("holdfast: force-unlocking %q: %w", name, err)
		}
		return nil
	}
	for _, k := range lockKinds {
		freed, err := k.forceUnlock(ctx, c, rdb, name)
		if err != nil {
			return fmt.Errorf("holdfast: force-unlocking %q: %w", name, err)
		}
		if freed {
			return nil
		}
	}
	return nil
}

// Names returns the names held now whose name matches pattern (Redis glob
// syntax: *, ?, [abc], \ escapes; "" means "*"), sorted. It scans every node
// of a cluster. A name may be released or granted while the scan runs: a name
// held throughout is listed, others may or may not be.
func (c *Client) Names(ctx context.Context, pattern string) ([]string, error) {
	if pattern == "" {
		pattern = "*"
	}
	rdb, err := c.inspectable(ctx)
	if err != nil {
		return nil, err
	}
	if c.cfg.Layout == LayoutRedisson {
		return redissonNames(ctx, rdb, pattern)
	}
	seen := map[string]bool{}
	// Nodes includes replicas on a cluster; seen drops their duplicates, and
	// those of kinds that mark a name held with the same key.
	for _, k := range lockKinds {
		err := scanNodes(ctx, rdb, k.heldKeyPattern(pattern), "", func(_ rueidis.Client, key string) {
			if name, ok := k.nameOfHeldKey(key); ok {
				seen[name] = true
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return sortedNames(seen), nil
}

// scanNodes SCANs every node of rdb for keys matching match (and of type
// typ, unless empty) and calls each with every key and the node holding it.
func scanNodes(ctx context.Context, rdb rueidis.Client, match, typ string, each func(node rueidis.Client, key string)) error {
	for addr, node := range rdb.Nodes() {
		var cursor uint64
		for {
			cmd := node.B().Scan().Cursor(cursor).Match(match).Count(1000)
			var entry rueidis.ScanEntry
			var err error
			if typ != "" {
				entry, err = node.Do(ctx, cmd.Type(typ).Build()).AsScanEntry()
			} else {
				entry, err = node.Do(ctx, cmd.Build()).AsScanEntry()
			}
			if err != nil {
				return fmt.Errorf("holdfast: scanning %s: %w", addr, err)
			}
			for _, key := range entry.Elements {
				each(node, key)
			}
			if cursor = entry.Cursor; cursor == 0 {
				break
			}
		}
	}
	return nil
}

// sortedNames returns the names of seen, sorted.
func sortedNames(seen map[string]bool) []string {
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// inspectable checks the arguments shared by the operator's calls and returns
// the Redis client to use.
func (c *Client) inspectable(ctx context.Context) (rueidis.Client, error) {
	switch {
	case ctx == nil:
		return nil, fmt.Errorf("%w: nil context", ErrInvalidOption)
	case !c.usable():
		return nil, errNoClient
	case c.cfg.Redis == nil:
		return nil, errNoRedis
	}
	return c.cfg.Redis, nil
}

// lockKind is what Inspect and ForceUnlock know of one lock kind. Adding a
// kind adds one entry to lockKinds and touches nothing else here. Kinds share
// the name space and a name is in use as at most one kind, so the first kind
// that finds the name held answers. Each kind's inspect script tells its own
// keys from another kind's (the reentrant lock's key is a string, the other
// kinds' a hash with a "kind" field), so the order does not matter.
type lockKind struct {
	kind string
	// inspect reads name's keys of this kind into info (Holders, TTL,
	// Waiters) and reports whether name is held as this kind.
	inspect func(ctx context.Context, rdb rueidis.Client, name string, info *Info) (held bool, err error)
	// forceUnlock frees name if it is held as this kind, raising its fence
	// and waking its waiters, and reports whether it did.
	// It gets the Client for the settings a kind's release uses.
	forceUnlock func(ctx context.Context, c *Client, rdb rueidis.Client, name string) (freed bool, err error)
	// heldKeyPattern is the SCAN MATCH pattern of the keys that exist while
	// a name matching glob is held as this kind; nameOfHeldKey maps such a
	// key back to its name (false for other keys the pattern catches).
	heldKeyPattern func(glob string) string
	nameOfHeldKey  func(key string) (string, bool)
}

var lockKinds = []lockKind{
	{
		kind:           KindSemaphore,
		inspect:        inspectSem,
		forceUnlock:    forceUnlockSem,
		heldKeyPattern: scripts.LockKeyPattern,
		nameOfHeldKey:  scripts.NameOfLockKey,
	},
	{
		kind:           KindRW,
		inspect:        inspectRW,
		forceUnlock:    forceUnlockRW,
		heldKeyPattern: scripts.LockKeyPattern,
		nameOfHeldKey:  scripts.NameOfLockKey,
	},
	{
		// Before KindLock: the same hash, marked kind=election.
		kind:           KindElection,
		inspect:        inspectElection,
		forceUnlock:    forceUnlockElection,
		heldKeyPattern: scripts.LockKeyPattern,
		nameOfHeldKey:  scripts.NameOfLockKey,
	},
	{
		kind:           KindLock,
		inspect:        inspectReentrant,
		forceUnlock:    forceUnlockReentrant,
		heldKeyPattern: scripts.LockKeyPattern,
		nameOfHeldKey:  scripts.NameOfLockKey,
	},
	{
		kind:        KindFair,
		inspect:     inspectFair,
		forceUnlock: forceUnlockFair,
		// A fair lock's hash exists while it is held or granted; a name only
		// queued for is not listed.
		heldKeyPattern: scripts.LockKeyPattern,
		nameOfHeldKey:  scripts.NameOfLockKey,
	},
}

var (
	inspectScript         = rueidis.NewLuaScript(scripts.Inspect)
	forceUnlockScript     = rueidis.NewLuaScript(scripts.ForceUnlock)
	fairInspectScript     = rueidis.NewLuaScript(scripts.FairInspect)
	fairForceUnlockScript = rueidis.NewLuaScript(scripts.FairForceUnlock)
	// On a cluster waiters SSUBSCRIBE: the variants that SPUBLISH.
	forceUnlockSharded     = rueidis.NewLuaScript(scripts.Sharded(scripts.ForceUnlock))
	fairForceUnlockSharded = rueidis.NewLuaScript(scripts.Sharded(scripts.FairForceUnlock))
)

func inspectReentrant(ctx context.Context, rdb rueidis.Client, name string, info *Info) (bool, error) {
	reply, err := inspectScript.Exec(ctx, rdb, []string{scripts.LockKey(name)}, nil).ToArray()
	if err != nil {
		return false, err
	}
	pttl, err := replyInt(reply, 0)
	if err != nil || pttl == -2 {
		return false, err
	}
	if info.Holders, err = decodeHolders(reply[1:]); err != nil {
		return false, err
	}
	info.TTL = ttlOf(pttl)
	return true, nil
}

func forceUnlockReentrant(ctx context.Context, _ *Client, rdb rueidis.Client, name string) (bool, error) {
	keys := scripts.GrantKeys(name)
	script := forceUnlockScript
	if rdb.Mode() == rueidis.ClientModeCluster {
		script = forceUnlockSharded
	}
	n, err := script.Exec(ctx, rdb, keys, []string{scripts.Channel(name)}).AsInt64()
	return n == 1, err
}

func inspectFair(ctx context.Context, rdb rueidis.Client, name string, info *Info) (bool, error) {
	keys := []string{scripts.LockKey(name), scripts.FairQueueKey(name)}
	reply, err := fairInspectScript.Exec(ctx, rdb, keys, nil).ToArray()
	if err != nil {
		return false, err
	}
	pttl, err := replyInt(reply, 0)
	if err != nil || pttl == -3 {
		return false, err
	}
	waiters, err := replyInt(reply, 1)
	if err != nil {
		return false, err
	}
	if info.Holders, err = decodeHolders(reply[2:]); err != nil {
		return false, err
	}
	info.Waiters = int(waiters)
	if pttl != -2 { // -2: only queued for, nobody holds it
		info.TTL = ttlOf(pttl)
	}
	return true, nil
}

// forceUnlockFair grants the name to its next waiter at once, with this
// Client's WaiterTimeout to confirm.
func forceUnlockFair(ctx context.Context, c *Client, rdb rueidis.Client, name string) (bool, error) {
	keys := scripts.GrantKeys(name, scripts.FairQueueKey(name))
	args := []string{scripts.Millis(c.cfg.WaiterTimeout), scripts.ClientChannel(name, "")}
	script := fairForceUnlockScript
	if rdb.Mode() == rueidis.ClientModeCluster {
		script = fairForceUnlockSharded
	}
	n, err := script.Exec(ctx, rdb, keys, args).AsInt64()
	return n == 1, err
}

// replyInt is element i of a script's array reply, as an integer.
func replyInt(reply []rueidis.RedisMessage, i int) (int64, error) {
	if i >= len(reply) {
		return 0, fmt.Errorf("script reply of %d elements", len(reply))
	}
	return reply[i].AsInt64()
}

// decodeHolders decodes field, count pairs, sorted by owner.
func decodeHolders(pairs []rueidis.RedisMessage) ([]Holder, error) {
	if len(pairs)%2 != 0 {
		return nil, fmt.Errorf("script reply: %d elements of field, count pairs", len(pairs))
	}
	holders := make([]Holder, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		owner, err1 := pairs[i].ToString()
		count, err2 := pairs[i+1].ToString()
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("script reply: %w", err)
		}
		n, err := strconv.ParseInt(count, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("script reply: owner %q has count %q", owner, count)
		}
		holders = append(holders, Holder{Owner: owner, Count: n})
	}
	sort.Slice(holders, func(i, j int) bool { return holders[i].Owner < holders[j].Owner })
	return holders, nil
}

// ttlOf turns a PTTL reply into Info.TTL.
func ttlOf(pttl int64) time.Duration {
	if pttl < 0 {
		return -1
	}
	return time.Duration(pttl) * time.Millisecond
}

// readFence reads name's fence: its slot's counter (see scripts/fence.lua),
// as the scripts' fence_peek does — at least every token the name was given.
// GET is among the commands the documented ACL rules grant.
func readFence(ctx context.Context, rdb rueidis.Client, name string) (uint64, error) {
	s, err := rdb.Do(ctx, rdb.B().Get().Key(scripts.FenceKey(name)).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(s, 10, 64)
}
