package actor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/pubsub"
	"github.com/holdfast/holdfast/scripts"
)

// Redis is what the runtime needs from a Redis deployment: a way to run the
// lock scripts. Production uses Rueidis; the simulator in package sim
// supplies its own. Implementations must be safe for concurrent use.
type Redis interface {
	// Call runs one script call and returns its integer or integer-array
	// reply as a slice (one element for an integer).
	Call(ctx context.Context, c scripts.Call) ([]int64, error)
	// Group names the batch group of a lock key for renewals (the cluster
	// slot), or nil when every key may share one call.
	Group() func(key string) uint16
	// Classify tells how a call that returned err failed.
	Classify(err error) lockactor.Fault
}

// Rueidis runs the scripts on a rueidis client, by EVALSHA with an EVAL
// fallback, so concurrent calls share round trips through auto-pipelining.
type Rueidis struct {
	client rueidis.Client
	lua    map[*scripts.Script]*rueidis.Lua
	shas   sync.Map // *scripts.Script -> SHA1 of its source (RenewMulti, Synced)
	// crosses and routes send a cluster's renewals per node (renewByNode).
	crosses sync.Map // *scripts.Script -> *crossScript
	routes  nodeRoutes
}

// NewRueidis returns the scripts bound to client. On a cluster it runs
// their sharded variants, which SPUBLISH (waiters SSUBSCRIBE there, see
// package pubsub).
func NewRueidis(client rueidis.Client) *Rueidis {
	r := &Rueidis{client: client, lua: make(map[*scripts.Script]*rueidis.Lua)}
	for _, s := range scripts.All() {
		r.lua[s] = rueidis.NewLuaScript(r.source(s))
	}
	return r
}

// source is the Lua source r runs for s.
func (r *Rueidis) source(s *scripts.Script) string {
	if r.client.Mode() == rueidis.ClientModeCluster {
		return scripts.Sharded(s.Src)
	}
	return s.Src
}

// Call implements Redis: the one place a script call meets rueidis.
func (r *Rueidis) Call(ctx context.Context, c scripts.Call) ([]int64, error) {
	lua := r.lua[c.Script]
	if lua == nil {
		return nil, fmt.Errorf("holdfast: script %q not registered with scripts.NewScript", c.Script.Name)
	}
	msg, err := lua.Exec(ctx, r.client, c.Keys, c.Args).ToMessage()
	if err != nil {
		return nil, err
	}
	return ints(msg)
}

// ints turns an integer or integer-array reply into a slice.
func ints(msg rueidis.RedisMessage) ([]int64, error) {
	return intsInto(nil, msg)
}

// intsInto appends an integer or integer-array reply to dst: with room in
// dst, decoding allocates nothing.
func intsInto(dst []int64, msg rueidis.RedisMessage) ([]int64, error) {
	if !msg.IsArray() {
		n, err := msg.AsInt64()
		if err != nil {
			return nil, err
		}
		return append(dst, n), nil
	}
	arr, err := msg.ToArray()
	if err != nil {
		return nil, err
	}
	dst = slices.Grow(dst, len(arr))
	for _, v := range arr {
		n, err := v.AsInt64()
		if rueidis.IsRedisNil(err) {
			n, err = 0, nil // as rueidis' AsIntSlice reads a nil element
		}
		if err != nil {
			return nil, err
		}
		dst = append(dst, n)
	}
	return dst, nil
}

// Renew runs a batch script of the renewal shape (see renewal.Exec).
func (r *Rueidis) Renew(ctx context.Context, s *scripts.Script, keys, args []string) ([]bool, error) {
	vals, err := r.Call(ctx, scripts.Call{Script: s, Keys: keys, Args: args})
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(vals))
	for i, v := range vals {
		out[i] = v == 1
	}
	return out, nil
}

// Group implements Redis: one group on a standalone server or through
// Sentinel; on a cluster, the master serving the key's slot as the slot
// map last read says (the key's slot until it is first read): the renewals
// of one node share calls (RenewMulti).
func (r *Rueidis) Group() func(string) uint16 {
	if r.client.Mode() != rueidis.ClientModeCluster {
		return nil
	}
	return r.routes.group
}

// Classify implements Redis. A Redis error reply means the script was
// refused before it wrote anything (every script's first write follows its
// reads, and OOM/READONLY refuse the first write). Replies that only a
// change of configuration or data can fix — ACL denials, unknown commands,
// WRONGTYPE, script errors, authentication — are Permanent: retrying them
// would make a misconfiguration look like contention. The rest (OOM,
// READONLY after failover, LOADING, BUSY, MASTERDOWN, TRYAGAIN…) may pass
// later. Anything else — timeouts, broken connections — may have run.
func (r *Rueidis) Classify(err error) lockactor.Fault {
	return ClassifyRueidis(err)
}

// ClassifyRueidis is Rueidis.Classify, for other adapters over rueidis.
func ClassifyRueidis(err error) lockactor.Fault {
	if err == nil {
		return lockactor.NoFault
	}
	if rerr, ok := rueidis.IsRedisErr(err); ok {
		if permanentReply(rerr.Error()) {
			return lockactor.Permanent
		}
		if strings.HasPrefix(rerr.Error(), "READONLY") {
			return lockactor.Demoted
		}
		return lockactor.Transient
	}
	if errors.Is(err, rueidis.ErrClosing) {
		return lockactor.Transient
	}
	return lockactor.Ambiguous
}

// permanentPrefixes start the error replies that the same call will get
// again: the first word is the error code, and a script refused inside
// Redis (an ACL denial of one of its commands, a runtime error) comes back
// as ERR with the reason after it. rueidis may drop the "ERR " code, so it
// is matched without it.
var permanentPrefixes = []string{
	"NOPERM", "NOAUTH", "WRONGPASS", "WRONGTYPE",
	"unknown command", "unknown subcommand", "wrong number of arguments",
	"The user executing the script can't run this command",
	"Unknown Redis command called from script",
	"user_script:", "Error running script", "Error compiling script",
}

func permanentReply(msg string) bool {
	msg = strings.TrimPrefix(msg, "ERR ")
	for _, p := range permanentPrefixes {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// Slot is the Redis Cluster slot of key (CRC16 of its hash tag, mod 16384).
func Slot(key string) uint16 { return pubsub.Slot(key) }
