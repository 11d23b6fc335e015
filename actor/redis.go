package actor

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/scripts"
)

// Redis is what the runtime needs from a Redis deployment: the lock
// scripts. Production uses Rueidis; the simulator in package sim supplies its
// own. Implementations must be safe for concurrent use.
type Redis interface {
	Acquire(ctx context.Context, name, field string, lease time.Duration, expected int64) (lockactor.AcquireResult, error)
	Release(ctx context.Context, name, field string, expected int64) (left int64, err error)
	// Handoff releases from (count 1) and acquires for to in one call: the
	// release's outcome, then the acquire's.
	Handoff(ctx context.Context, name, from, to string, lease time.Duration) (left int64, acquire lockactor.AcquireResult, err error)
	// Renew runs the batched renew script; args are field, lease-ms pairs.
	Renew(ctx context.Context, keys, args []string) ([]bool, error)
	// Group names the batch group of a lock key for renewals (the cluster
	// slot), or nil when every key may share one call.
	Group() func(key string) uint16
	// Classify tells how a call that returned err failed.
	Classify(err error) lockactor.Fault
}

// Rueidis runs the scripts on a rueidis client, by EVALSHA with an EVAL
// fallback, so concurrent calls share round trips through auto-pipelining.
type Rueidis struct {
	client                           rueidis.Client
	acquire, release, renew, handoff *rueidis.Lua
}

// NewRueidis returns the scripts bound to client.
func NewRueidis(client rueidis.Client) *Rueidis {
	return &Rueidis{
		client:  client,
		acquire: rueidis.NewLuaScript(scripts.Acquire),
		release: rueidis.NewLuaScript(scripts.Release),
		renew:   rueidis.NewLuaScript(scripts.Renew),
		handoff: rueidis.NewLuaScript(scripts.Handoff),
	}
}

// Acquire implements Redis.
func (r *Rueidis) Acquire(ctx context.Context, name, field string, lease time.Duration, expected int64) (lockactor.AcquireResult, error) {
	keys := scripts.GrantKeys(name)
	args := []string{field, millis(lease), strconv.FormatInt(expected, 10)}
	vals, err := r.acquire.Exec(ctx, r.client, keys, args).AsIntSlice()
	if err != nil {
		return lockactor.AcquireResult{}, err
	}
	return lockactor.DecodeAcquire(vals)
}

// Release implements Redis.
func (r *Rueidis) Release(ctx context.Context, name, field string, expected int64) (int64, error) {
	keys := []string{scripts.LockKey(name)}
	args := []string{field, strconv.FormatInt(expected, 10), scripts.Channel(name)}
	return r.release.Exec(ctx, r.client, keys, args).AsInt64()
}

// Handoff implements Redis.
func (r *Rueidis) Handoff(ctx context.Context, name, from, to string, lease time.Duration) (int64, lockactor.AcquireResult, error) {
	keys := scripts.GrantKeys(name)
	vals, err := r.handoff.Exec(ctx, r.client, keys, []string{from, to, millis(lease)}).AsIntSlice()
	if err != nil {
		return 0, lockactor.AcquireResult{}, err
	}
	return lockactor.DecodeHandoff(vals)
}

// Renew implements Redis.
func (r *Rueidis) Renew(ctx context.Context, keys, args []string) ([]bool, error) {
	vals, err := r.renew.Exec(ctx, r.client, keys, args).AsIntSlice()
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
// Sentinel, the key's slot on a cluster.
func (r *Rueidis) Group() func(string) uint16 {
	if r.client.Mode() != rueidis.ClientModeCluster {
		return nil
	}
	return Slot
}

// Classify implements Redis. A Redis error reply means the script was
// refused before it wrote anything (every script's first write follows its
// reads, and OOM/READONLY refuse the first write): WRONGTYPE will be refused
// again; the rest (OOM, READONLY after failover, LOADING, BUSY, MASTERDOWN…)
// may pass later. Anything else — timeouts, broken connections — may have
// run.
func (r *Rueidis) Classify(err error) lockactor.Fault {
	return ClassifyRueidis(err)
}

// ClassifyRueidis is Rueidis.Classify, for other adapters over rueidis.
func ClassifyRueidis(err error) lockactor.Fault {
	if err == nil {
		return lockactor.NoFault
	}
	if rerr, ok := rueidis.IsRedisErr(err); ok {
		if strings.HasPrefix(rerr.Error(), "WRONGTYPE") {
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

func millis(d time.Duration) string {
	ms := d.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	return strconv.FormatInt(ms, 10)
}

// Slot is the Redis Cluster slot of key (scripts.Slot).
func Slot(key string) uint16 { return scripts.Slot(key) }
