package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast"
)

const (
	rwClients   = 4
	rwPerClient = 16
	// rwWriteShare is the share of writers among the requests.
	rwWriteShare = 0.1
	// rwWork is how long each hold lasts: the reader's or writer's work on
	// the resource, during which readers of an RW lock overlap.
	rwWork = time.Millisecond
)

// runRWLock measures holdfast's read-write lock on one hot name: 4 clients ×
// 16 goroutines, each asking in a loop for a read hold (90%) or a write hold
// (10%) and keeping it for 1 ms of work. It reports reads/s, writes/s and
// the p99 of a writer's wait, then runs the same load with every request a
// Lock (exclusive), and reports how many times more reads/s the RW lock gives.
// holdfast only: the peers have no read-write lock on Redis.
func runRWLock(e *env) error {
	if !contains(e.libs, libHoldfast) {
		return nil
	}
	warm, dur := 300*time.Millisecond, 2*time.Second
	if e.quick {
		warm, dur = 150*time.Millisecond, 600*time.Millisecond
	}
	for r := range e.rounds() {
		var rw, ex rwFigures
		var err error
		labelled("rwlock", libHoldfast, func(ctx context.Context) {
			if rw, err = rwRound(ctx, e, r, true, warm, dur); err != nil {
				return
			}
			ex, err = rwRound(ctx, e, r, false, warm, dur)
		})
		if err != nil {
			return err
		}
		e.res.add("rwlock", libHoldfast, "reads_per_s", rw.reads)
		e.res.add("rwlock", libHoldfast, "writes_per_s", rw.writes)
		e.res.add("rwlock", libHoldfast, "writer_wait_p99_us", us(rw.writerWaitP99))
		e.res.add("rwlock", libHoldfast, "lock_reads_per_s", ex.reads)
		e.res.add("rwlock", libHoldfast, "lock_writes_per_s", ex.writes)
		e.res.add("rwlock", libHoldfast, "lock_writer_wait_p99_us", us(ex.writerWaitP99))
		if ex.reads > 0 {
			e.res.add("rwlock", libHoldfast, "read_speedup", rw.reads/ex.reads)
		}
		if r == e.rounds()-1 {
			e.notef("rwlock (last round): RW lock %.0f reads/s, %.0f writes/s, most readers at once %d; Lock %.0f reads/s, %.0f writes/s",
				rw.reads, rw.writes, rw.maxReaders, ex.reads, ex.writes)
		}
	}
	return nil
}

type rwFigures struct {
	reads, writes float64
	writerWaitP99 time.Duration
	maxReaders    int64
}

// rwRound runs the load once: with ReadLock/WriteLock when rw, else with Lock
// for every request.
func rwRound(ctx context.Context, e *env, round int, rw bool, warm, dur time.Duration) (rwFigures, error) {
	cls, done, err := e.holdfastClients(rwClients)
	defer done()
	if err != nil {
		return rwFigures{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	name := fmt.Sprintf("rw:%v:%d", rw, round)

	var measuring, stop atomic.Bool
	var reads, writes, readers, maxReaders, writersIn, broken atomic.Int64
	var mu sync.Mutex
	var waits []time.Duration
	var lastErr atomic.Value
	var wg sync.WaitGroup
	for g := range rwClients * rwPerClient {
		wg.Add(1)
		go func(g int, c *holdfast.Client) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(round), uint64(g)))
			for !stop.Load() {
				write := rng.Float64() < rwWriteShare
				asked := time.Now()
				var l *holdfast.Lock
				switch {
				case !rw:
					l = c.Lock(ctx, name)
				case write:
					l = c.WriteLock(ctx, name)
				default:
					l = c.ReadLock(ctx, name)
				}
				if err := l.Wait(ctx); err != nil {
					if ctx.Err() == nil {
						lastErr.Store(fmt.Sprint(err))
					}
					continue
				}
				if write {
					if writersIn.Add(1) != 1 || readers.Load() != 0 {
						broken.Add(1)
					}
				} else {
					n := readers.Add(1)
					if writersIn.Load() != 0 {
						broken.Add(1)
					}
					for m := maxReaders.Load(); n > m && !maxReaders.CompareAndSwap(m, n); m = maxReaders.Load() {
					}
				}
				wait := time.Since(asked)
				time.Sleep(rwWork)
				if write {
					writersIn.Add(-1)
				} else {
					readers.Add(-1)
				}
				l.Release(context.Background())
				if !measuring.Load() {
					continue
				}
				if write {
					writes.Add(1)
					mu.Lock()
					waits = append(waits, wait)
					mu.Unlock()
				} else {
					reads.Add(1)
				}
			}
		}(g, cls[g%rwClients])
	}
	time.Sleep(warm)
	measuring.Store(true)
	ws := time.Now()
	time.Sleep(dur)
	measuring.Store(false)
	secs := time.Since(ws).Seconds()
	stop.Store(true)
	cancel()
	wg.Wait()
	if n := broken.Load(); n > 0 {
		e.notef("rwlock/%v round %d: EXCLUSION BROKEN %d times", rw, round, n)
	}
	if err := lastErr.Load(); err != nil {
		e.notef("rwlock/%v round %d: last error %v", rw, round, err)
	}
	mu.Lock()
	defer mu.Unlock()
	return rwFigures{
		reads:         float64(reads.Load()) / secs,
		writes:        float64(writes.Load()) / secs,
		writerWaitP99: percentile(waits, 99),
		maxReaders:    maxReaders.Load(),
	}, nil
}

// holdfastClients opens n holdfast Clients on the server, each with its
// own rueidis client; done closes every one opened.
func (e *env) holdfastClients(n int, layout ...holdfast.Layout) (cls []*holdfast.Client, done func(), err error) {
	var rdbs []rueidis.Client
	done = func() {
		for i := range cls {
			cls[i].Close()
			rdbs[i].Close()
		}
	}
	for range n {
		rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{e.srv.addr}})
		if err != nil {
			return cls, done, err
		}
		cfg := holdfast.Config{Redis: rdb}
		if len(layout) > 0 {
			cfg.Layout = layout[0]
		}
		c, err := holdfast.New(cfg)
		if err != nil {
			rdb.Close()
			return cls, done, err
		}
		cls, rdbs = append(cls, c), append(rdbs, rdb)
	}
	return cls, done, nil
}
