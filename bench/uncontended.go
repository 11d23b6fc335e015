package main

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// uncontendedWorkers goroutines each lock and release their own key.
const uncontendedWorkers = 64

// runUncontended measures acquire+release cycles per second with no
// contention, acquire latency, and allocations per cycle.
func runUncontended(e *env) error {
	warm, dur := 300*time.Millisecond, 2*time.Second
	if e.quick {
		warm, dur = 150*time.Millisecond, 600*time.Millisecond
	}
	for r := range e.rounds() {
		// The floor runs before the libraries in even rounds and after
		// them in odd ones.
		floor := func() error {
			var f layoutFigures
			var err error
			labelled("uncontended", refBareScripts, func(ctx context.Context) {
				f, err = layoutRound(ctx, e, shippedShape, warm, dur)
			})
			if err != nil {
				return fmt.Errorf("%s: %w", refBareScripts, err)
			}
			e.res.add("uncontended", refBareScripts, "cycles_per_s", f.cyclesPerS)
			e.res.add("uncontended", refBareScripts, "client_cpu_us_per_cycle", f.clientUS)
			e.res.add("uncontended", refBareScripts, "redis_cpu_us_per_cycle", f.redisUS)
			return nil
		}
		if r%2 == 0 {
			if err := floor(); err != nil {
				return err
			}
		}
		for _, lib := range e.order(r) {
			var err error
			labelled("uncontended", lib, func(ctx context.Context) {
				err = uncontendedRound(ctx, e, lib, r, warm, dur)
			})
			if err != nil {
				return fmt.Errorf("%s: %w", lib, err)
			}
		}
		if r%2 == 1 {
			if err := floor(); err != nil {
				return err
			}
		}
	}
	e.noteRatios("uncontended", "cycles_per_s", refBareScripts, libRueidislock)
	return nil
}

// cyclesOf sums the workers' cycles so far.
func cyclesOf(ws []worker) int64 {
	var n int64
	for i := range ws {
		n += ws[i].n.Load()
	}
	return n
}

// worker is one goroutine's tally, padded so counters do not share a cache
// line.
type worker struct {
	n       atomic.Int64
	lat     []time.Duration
	errs    int
	lastErr error
	_       [64]byte
}

func uncontendedRound(ctx context.Context, e *env, lib string, round int, warm, dur time.Duration) error {
	ctr := newCounter()
	cl, err := e.open(lib, ctr, openOpts{})
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var stop, measuring atomic.Bool
	ws := make([]worker, uncontendedWorkers)
	for i := range ws {
		// Room for the window's latencies up front, so appending them does
		// not allocate inside the window (allocs_per_cycle is the library's).
		ws[i].lat = make([]time.Duration, 0, 4096)
	}
	var wg sync.WaitGroup
	for i := range ws {
		wg.Add(1)
		go func(w *worker, name string) {
			defer wg.Done()
			for !stop.Load() {
				t0 := time.Now()
				h, err := cl.Lock(ctx, name)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					w.errs, w.lastErr = w.errs+1, err
					time.Sleep(time.Millisecond)
					continue
				}
				t1 := time.Now()
				if measuring.Load() {
					w.lat = append(w.lat, t1.Sub(t0))
				}
				// The round's context stays live until every worker stopped,
				// so it serves Release too, with no per-cycle allocation of
				// the harness's own.
				if err := h.Release(ctx); err != nil {
					w.errs, w.lastErr = w.errs+1, err
				}
				w.n.Add(1)
			}
		}(&ws[i], fmt.Sprintf("u:%s:%d", lib, i))
	}
	sum := func() int64 { return cyclesOf(ws) }

	time.Sleep(warm)
	cmds0, stats0 := ctr.snapshot(), e.snapshot()
	wr0, cpu := ctr.writes.Load(), e.startCPU()
	// The allocation counts are read right next to the cycle counts (no
	// harness allocation between them), so allocs_per_cycle is the
	// process's mallocs in the window ÷ the cycles completed in it.
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	c0, t0 := sum(), time.Now()
	measuring.Store(true)
	time.Sleep(dur)
	measuring.Store(false)
	c1, t1 := sum(), time.Now()
	runtime.ReadMemStats(&m1)
	win, wr1 := cpu.stop(), ctr.writes.Load()
	cmds1, stats1 := ctr.snapshot(), e.snapshot()
	stop.Store(true)
	waitOrCancel(&wg, cancel, 10*time.Second)

	cycles := float64(c1 - c0)
	if cycles == 0 {
		return fmt.Errorf("no cycle completed in %v", dur)
	}
	var lat []time.Duration
	errs := 0
	var lastErr error
	for i := range ws {
		lat = append(lat, ws[i].lat...)
		errs += ws[i].errs
		if ws[i].lastErr != nil {
			lastErr = ws[i].lastErr
		}
	}
	e.res.add("uncontended", lib, "cycles_per_s", cycles/t1.Sub(t0).Seconds())
	e.res.add("uncontended", lib, "acquire_p50_us", us(percentile(lat, 50)))
	e.res.add("uncontended", lib, "acquire_p99_us", us(percentile(lat, 99)))
	e.res.add("uncontended", lib, "allocs_per_cycle", float64(m1.Mallocs-m0.Mallocs)/cycles)
	win.record(e.res, "uncontended", lib, cycles)
	if errs > 0 {
		e.notef("uncontended/%s round %d: %d errors, last: %v", lib, round, errs, lastErr)
	}
	if round == e.rounds()-1 {
		cmds := steady(countsDelta(cmds0, cmds1))
		e.notef("uncontended/%s (last round): %s; %.1f commands per write call; server calls incl. inside scripts %.2f per cycle; %s",
			lib, perUnit(cmds, cycles, "cycle"), float64(sumCalls(cmds))/float64(max(1, wr1-wr0)), float64(sumCalls(statsDelta(stats0, stats1)))/cycles, win.report(cycles, "cycle"))
	}
	return nil
}

// release gives a lock back with a context of its own: the round's context
// may already be cancelled, and a peer lock left behind would block the next
// round for its whole lease.
func release(h held) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return h.Release(ctx)
}

// waitOrCancel waits for wg; past grace it cancels the workers' context so
// blocked Lock calls return, and waits again.
func waitOrCancel(wg *sync.WaitGroup, cancel context.CancelFunc, grace time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		cancel()
		<-done
	}
}

// perUnit formats client commands per unit of work, e.g.
// "client commands 2.00 per cycle (evalsha 2.00)".
func perUnit(delta map[string]int64, units float64, unit string) string {
	total := float64(sumCalls(delta))
	s := fmt.Sprintf("client commands %.2f per %s (", total/units, unit)
	for i, k := range names(delta) {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %.3g", k, float64(delta[k])/units)
	}
	return s + ")"
}
