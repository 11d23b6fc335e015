package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast"
)

// The composite scenarios run on three servers of their own (the main one
// stays for the single-node scenarios): lockall takes two parts on two
// servers, uncontended (each worker its own pair of names) and contended
// (every worker the same pair); redlock takes a majority of three servers,
// holdfast's RedLock against redsync's (the algorithm redsync implements
// with several pools), uncontended.

const compositeWorkers = 16

// cluster is the three extra servers.
type cluster struct{ srvs []*server }

func startCluster() (*cluster, error) {
	c := &cluster{}
	for range 3 {
		s, err := startServer()
		if err != nil {
			c.stop()
			return nil, err
		}
		c.srvs = append(c.srvs, s)
	}
	return c, nil
}

func (c *cluster) stop() {
	for _, s := range c.srvs {
		s.stop()
	}
}

// hfClients opens one holdfast Client per server; close closes them.
func (c *cluster) hfClients() ([]*holdfast.Client, func(), error) {
	var clients []*holdfast.Client
	var rdbs []rueidis.Client
	closeAll := func() {
		for _, cl := range clients {
			cl.Close()
		}
		for _, r := range rdbs {
			r.Close()
		}
	}
	for _, s := range c.srvs {
		rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.addr}, DisableCache: true})
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		rdbs = append(rdbs, rdb)
		cl, err := holdfast.New(holdfast.Config{Redis: rdb})
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		clients = append(clients, cl)
	}
	return clients, closeAll, nil
}

// cycleRun runs workers calling cycle(worker) until dur has passed (after
// warm) and returns measured cycles per second and the last error.
func cycleRun(warm, dur time.Duration, workers int, cycle func(ctx context.Context, w int) error) (float64, int, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var n atomic.Int64
	var stop atomic.Bool
	var errs atomic.Int64
	var lastErr atomic.Value
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if err := cycle(ctx, w); err != nil {
					if ctx.Err() != nil {
						return
					}
					errs.Add(1)
					lastErr.Store(err)
					time.Sleep(time.Millisecond)
					continue
				}
				n.Add(1)
			}
		}()
	}
	time.Sleep(warm)
	c0, t0 := n.Load(), time.Now()
	time.Sleep(dur)
	c1, t1 := n.Load(), time.Now()
	stop.Store(true)
	waitOrCancel(&wg, cancel, 10*time.Second)
	err, _ := lastErr.Load().(error)
	return float64(c1-c0) / t1.Sub(t0).Seconds(), int(errs.Load()), err
}

func (e *env) compositeTimes() (time.Duration, time.Duration) {
	if e.quick {
		return 150 * time.Millisecond, 600 * time.Millisecond
	}
	return 300 * time.Millisecond, 2 * time.Second
}

func runLockAll(e *env) error {
	cl, err := startCluster()
	if err != nil {
		return err
	}
	defer cl.stop()
	clients, closeAll, err := cl.hfClients()
	if err != nil {
		return err
	}
	defer closeAll()
	warm, dur := e.compositeTimes()
	for r := range e.rounds() {
		for _, contended := range []bool{false, true} {
			scen, metric := "lockall", "cycles_per_s"
			if contended {
				metric = "contended_cycles_per_s"
			}
			var cps float64
			var errs int
			var last error
			labelled(scen, "holdfast", func(context.Context) {
				cps, errs, last = cycleRun(warm, dur, compositeWorkers, func(ctx context.Context, w int) error {
					a, b := fmt.Sprintf("acct:%d", w), fmt.Sprintf("acct:%d", w+compositeWorkers)
					if contended {
						a, b = "acct:a", "acct:b"
					}
					l := holdfast.LockAll(ctx, []holdfast.Target{{Client: clients[0], Name: a}, {Client: clients[1], Name: b}})
					if err := l.Wait(ctx); err != nil {
						return err
					}
					return l.Release(ctx)
				})
			})
			e.res.add(scen, "holdfast", metric, cps)
			if errs > 0 {
				e.notef("%s/%s round %d: %d errors, last: %v", scen, metric, r, errs, last)
			}
		}
	}
	return nil
}

func runRedLock(e *env) error {
	cl, err := startCluster()
	if err != nil {
		return err
	}
	defer cl.stop()
	clients, closeAll, err := cl.hfClients()
	if err != nil {
		return err
	}
	defer closeAll()
	var pools []rsredis.Pool
	for _, s := range cl.srvs {
		rdb := goredis.NewClient(&goredis.Options{Addr: s.addr})
		defer rdb.Close()
		pools = append(pools, rsgoredis.NewPool(rdb))
	}
	rs := redsync.New(pools...)
	warm, dur := e.compositeTimes()
	cycles := map[string]func(ctx context.Context, w int) error{
		"holdfast": func(ctx context.Context, w int) error {
			l := holdfast.RedLock(ctx, clients, fmt.Sprintf("ledger:%d", w))
			if err := l.Wait(ctx); err != nil {
				return err
			}
			return l.Release(ctx)
		},
		"redsync": func(ctx context.Context, w int) error {
			m := rs.NewMutex(fmt.Sprintf("rs-ledger:%d", w), redsync.WithExpiry(peerLease),
				redsync.WithTries(math.MaxInt32), redsync.WithRetryDelay(e.retryDelay))
			if err := m.LockContext(ctx); err != nil {
				return err
			}
			ok, err := m.UnlockContext(ctx)
			if err == nil && !ok {
				err = errors.New("redsync: unlock reported not held")
			}
			return err
		},
	}
	for r := range e.rounds() {
		libs := []string{"holdfast", "redsync"}
		if r%2 == 1 {
			libs[0], libs[1] = libs[1], libs[0]
		}
		for _, lib := range libs {
			var cps float64
			var errs int
			var last error
			labelled("redlock", lib, func(context.Context) {
				cps, errs, last = cycleRun(warm, dur, compositeWorkers, cycles[lib])
			})
			e.res.add("redlock", lib, "cycles_per_s", cps)
			if errs > 0 {
				e.notef("redlock/%s round %d: %d errors, last: %v", lib, r, errs, last)
			}
		}
	}
	return nil
}
