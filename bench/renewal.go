package main

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast/holdfast"
)

// renewalWatchdog is the lease renewed in the renewal scenario: holdfast's
// WatchdogTimeout (renewed every third of it) and rueidislock's KeyValidity,
// with its ExtendInterval set to the same third so both renew as often.
const renewalWatchdog = 3 * time.Second

// runRenewal holds many locks with the watchdog and measures what keeping
// them costs. redsync and redislock have no watchdog and are left out.
func runRenewal(e *env) error {
	// Three renewal periods of WatchdogTimeout/3 each.
	n, window, rounds := 100_000, renewalWatchdog, 2
	if e.quick {
		n, rounds = 10_000, 1
	}
	renewalSetup.held, renewalSetup.watchdog = n, renewalWatchdog
	libs := []string{}
	for _, l := range e.libs {
		if l == libHoldfast || l == libRueidislock {
			libs = append(libs, l)
		}
	}
	for r := range rounds {
		for i := range libs {
			lib := libs[(r+i)%len(libs)]
			var err error
			labelled("renewal", lib, func(ctx context.Context) {
				err = renewalRound(ctx, e, lib, n, window)
			})
			if err != nil {
				return fmt.Errorf("%s: %w", lib, err)
			}
			e.flush()
		}
	}
	return nil
}

// lost reports whether a held lock is over (holdfast's Lost, rueidislock's
// context).
func lost(h held) bool {
	var ch <-chan struct{}
	switch h := h.(type) {
	case *holdfast.Lock:
		ch = h.Lost
	case ruHeld:
		ch = h.ctx.Done()
	default:
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func renewalRound(ctx context.Context, e *env, lib string, n int, window time.Duration) error {
	ctr := newCounter()
	cl, err := e.open(lib, ctr, openOpts{watchdog: renewalWatchdog, extend: renewalWatchdog / 3})
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	lockNames := make([]string, n)
	for i := range lockNames {
		lockNames[i] = fmt.Sprintf("r:%s:%d", lib, i)
	}
	hs := make([]held, n)
	// One cycle first, so that what the client sets up once is not charged
	// to the locks.
	if h, err := cl.Lock(ctx, "r:warmup:"+lib); err != nil {
		return err
	} else if err := release(h); err != nil {
		return err
	}
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)

	t0 := time.Now()
	var failed atomic.Int64
	var firstErr atomic.Value
	parallel(256, n, func(i int) {
		h, err := cl.Lock(ctx, lockNames[i])
		if err != nil {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, fmt.Sprint(err))
			return
		}
		hs[i] = h
	})
	acquired := time.Since(t0)
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("%d of %d locks not acquired, first: %v", f, n, firstErr.Load())
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)

	c0, stats0, w0 := ctr.snapshot(), e.snapshot(), time.Now()
	time.Sleep(window)
	c1, stats1, w1 := ctr.snapshot(), e.snapshot(), time.Now()
	lostN := 0
	for _, h := range hs {
		if lost(h) {
			lostN++
		}
	}
	cmds := steady(countsDelta(c0, c1))
	secs := w1.Sub(w0).Seconds()
	e.res.add("renewal", lib, "renewal_commands_per_s", float64(sumCalls(cmds))/secs)
	e.res.add("renewal", lib, "heap_bytes_per_lock", (float64(m1.HeapAlloc)-float64(m0.HeapAlloc))/float64(n))
	e.res.add("renewal", lib, "lost_holds", float64(lostN))
	e.notef("renewal/%s: %d locks acquired in %.1f s; held %v; client commands %s; server calls incl. inside scripts %.0f/s; goroutine stacks +%.0f B/lock",
		lib, n, acquired.Seconds(), window.Round(time.Millisecond), fmtCounts(cmds), float64(sumCalls(statsDelta(stats0, stats1)))/secs,
		(float64(m1.StackInuse)-float64(m0.StackInuse))/float64(n))

	t1 := time.Now()
	parallel(256, n, func(i int) {
		if !lost(hs[i]) {
			release(hs[i])
		}
	})
	e.logf("renewal/%s: released %d locks in %.1f s", lib, n, time.Since(t1).Seconds())
	return nil
}

// parallel runs fn(0..n-1) on k goroutines.
func parallel(k, n int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}
