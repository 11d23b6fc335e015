package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/scripts"
)

// The layouts scenario prices holdfast's data model against the one it
// replaced and against the best peer's. The same bare client (rueidis, 64
// goroutines, one key each, acquire then release by EVALSHA) runs three
// script shapes of one uncontended cycle, so the only difference between
// them is what the server does:
//
//   - holdfast: the shipped acquire.lua and release.lua. The lock is a string
//     [w]COUNT:TOKEN:FIELD: a grant is EXISTS of the key and the fair queue,
//     INCR, SET PX; a final release GET, DEL (the waiter mark is in the
//     value); 7 commands a cycle with the two EVALSHAs.
//   - hash: the data model before it, a hash field OWNER ->
//     count with a separate waiter-mark key: EXISTS of the hash, the fair
//     queue and the old per-name counter, HINCRBY, INCR, PEXPIRE; HGET,
//     HDEL, EXISTS of the hash and the mark; 9 commands.
//   - peer: the server work of rueidislock's cycle, the best peer's (SET NX
//     PX and a GET that registers the key for client-side caching; GET and
//     DEL): no fencing, no reentry, no waiter mark; 6 commands.
//
// hash and peer are references: only their uncontended path is written,
// and a call that would need any other path fails the round.

// layoutShape is one acquire/release pair of scripts and how to call them.
type layoutShape struct {
	name             string
	acquire, release *rueidis.Lua
	acquireKeys      func(name string) []string
	acquireArgs      func(owner string) []string
	releaseKeys      func(name string) []string
	releaseArgs      func(name, owner string) []string
}

const layoutLease = "30000"

// shippedShape is holdfast's own acquire.lua and release.lua.
var shippedShape = layoutShape{
	name:        "holdfast",
	acquire:     rueidis.NewLuaScript(scripts.Acquire),
	release:     rueidis.NewLuaScript(scripts.Release),
	acquireKeys: func(name string) []string { return scripts.GrantKeys(name, scripts.FairQueueKey(name)) },
	acquireArgs: func(owner string) []string { return []string{owner, layoutLease, "0"} },
	releaseKeys: func(name string) []string { return []string{scripts.LockKey(name)} },
	releaseArgs: func(name, owner string) []string { return []string{owner, "1", scripts.Channel(name), "0"} },
}

var layoutShapes = []layoutShape{
	shippedShape,
	{
		name: "hash",
		acquire: rueidis.NewLuaScript(`
if redis.call('exists', KEYS[1], KEYS[3], KEYS[4]) == 0 then
  redis.call('hincrby', KEYS[1], ARGV[1], 1)
  local token = redis.call('incr', KEYS[2])
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {1, 1, token}
end
return redis.error_reply('layouts: only the uncontended path is written')`),
		release: rueidis.NewLuaScript(`
if redis.call('hget', KEYS[1], ARGV[1]) ~= '1' then
  return redis.error_reply('layouts: only the uncontended path is written')
end
redis.call('hdel', KEYS[1], ARGV[1])
if redis.call('exists', KEYS[1], KEYS[2]) > 0 then redis.call('publish', ARGV[2], 'released') end
return 0`),
		acquireKeys: func(name string) []string {
			return []string{scripts.LockKey(name), scripts.FenceKey(name), scripts.FairQueueKey(name), scripts.LockKey(name) + ":fence"}
		},
		acquireArgs: func(owner string) []string { return []string{owner, layoutLease} },
		releaseKeys: func(name string) []string { return []string{scripts.LockKey(name), scripts.LockKey(name) + ":w"} },
		releaseArgs: func(name, owner string) []string { return []string{owner, scripts.Channel(name)} },
	},
	{
		name: "peer",
		acquire: rueidis.NewLuaScript(`
local ok = redis.call('set', KEYS[1], ARGV[1], 'nx', 'px', ARGV[2])
redis.call('get', KEYS[1])
if not ok then return redis.error_reply('layouts: only the uncontended path is written') end
return 1`),
		release: rueidis.NewLuaScript(`
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('layouts: only the uncontended path is written')
end
return redis.call('del', KEYS[1])`),
		acquireKeys: func(name string) []string { return []string{scripts.LockKey(name)} },
		acquireArgs: func(owner string) []string { return []string{owner, layoutLease} },
		releaseKeys: func(name string) []string { return []string{scripts.LockKey(name)} },
		releaseArgs: func(_, owner string) []string { return []string{owner} },
	},
}

// layoutFigures are one round's figures of one shape.
type layoutFigures struct {
	cyclesPerS, redisUS, scriptUS, clientUS, cmds float64
}

func runLayouts(e *env) error {
	warm, dur := 300*time.Millisecond, 2*time.Second
	if e.quick {
		warm, dur = 150*time.Millisecond, 600*time.Millisecond
	}
	got := map[string][]layoutFigures{}
	for r := range e.rounds() {
		for i := range layoutShapes {
			s := layoutShapes[(r+i)%len(layoutShapes)]
			var f layoutFigures
			var err error
			labelled("layouts", s.name, func(ctx context.Context) {
				f, err = layoutRound(ctx, e, s, warm, dur)
			})
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			got[s.name] = append(got[s.name], f)
		}
	}
	for _, s := range layoutShapes {
		fs := got[s.name]
		pick := func(f func(layoutFigures) float64) float64 {
			v := make([]float64, len(fs))
			for i := range fs {
				v[i] = f(fs[i])
			}
			return median(v)
		}
		e.notef("layouts/%s (median of %d rounds): %.0f cycles/s, redis-server %.1f µs per cycle (%.1f of them in EVALSHA), bench %.1f µs per cycle, %.2f server calls per cycle incl. inside scripts",
			s.name, len(fs), pick(func(f layoutFigures) float64 { return f.cyclesPerS }),
			pick(func(f layoutFigures) float64 { return f.redisUS }),
			pick(func(f layoutFigures) float64 { return f.scriptUS }),
			pick(func(f layoutFigures) float64 { return f.clientUS }),
			pick(func(f layoutFigures) float64 { return f.cmds }))
	}
	return nil
}

func layoutRound(ctx context.Context, e *env, s layoutShape, warm, dur time.Duration) (layoutFigures, error) {
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{e.srv.addr}})
	if err != nil {
		return layoutFigures{}, err
	}
	defer rdb.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var stop atomic.Bool
	var failed atomic.Pointer[error]
	counts := make([]worker, uncontendedWorkers)
	var wg sync.WaitGroup
	for i := range counts {
		wg.Add(1)
		go func(w *worker, name string) {
			defer wg.Done()
			owner := scripts.Field("bench", "layouts", fmt.Sprint(i))
			aKeys, aArgs := s.acquireKeys(name), s.acquireArgs(owner)
			rKeys, rArgs := s.releaseKeys(name), s.releaseArgs(name, owner)
			for !stop.Load() {
				err := s.acquire.Exec(ctx, rdb, aKeys, aArgs).Error()
				if err == nil {
					err = s.release.Exec(ctx, rdb, rKeys, rArgs).Error()
				}
				if err != nil {
					if ctx.Err() == nil {
						failed.CompareAndSwap(nil, &err)
					}
					return
				}
				w.n.Add(1)
			}
		}(&counts[i], fmt.Sprintf("l:%s:%d", s.name, i))
	}
	sum := func() int64 { return cyclesOf(counts) }
	time.Sleep(warm)
	usec0, err := e.admin.commandUsec()
	if err != nil {
		return layoutFigures{}, err
	}
	stats0, cpu := e.snapshot(), e.startCPU()
	c0, t0 := sum(), time.Now()
	time.Sleep(dur)
	c1, t1 := sum(), time.Now()
	win, stats1 := cpu.stop(), e.snapshot()
	usec1, err := e.admin.commandUsec()
	if err != nil {
		return layoutFigures{}, err
	}
	stop.Store(true)
	waitOrCancel(&wg, cancel, 10*time.Second)
	if p := failed.Load(); p != nil {
		return layoutFigures{}, *p
	}
	cycles := float64(c1 - c0)
	if cycles == 0 {
		return layoutFigures{}, fmt.Errorf("no cycle completed in %v", dur)
	}
	calls := statsDelta(stats0, stats1)
	return layoutFigures{
		cyclesPerS: cycles / t1.Sub(t0).Seconds(),
		redisUS:    us(win.redis) / cycles,
		scriptUS:   float64(usec1-usec0) / cycles,
		clientUS:   us(win.self) / cycles,
		cmds:       float64(sumCalls(calls)) / cycles,
	}, nil
}
