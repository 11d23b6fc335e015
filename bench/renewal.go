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
				err = renewalRound(ctx, e, "renewal", lib, n, window)
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
	case *ruHeld:
		ch = h.ctx.Done()
	case *rsExtHeld:
		ch = h.lostCh
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

// renewalRound holds n locks of lib and records what keeping them costs
// under scenario.
func renewalRound(ctx context.Context, e *env, scenario, lib string, n int, window time.Duration) error {
	ctr := newCounter()
	cl, err := e.open(lib, ctr, openOpts{watchdog: renewalWatchdog, extend: renewalWatchdog / 3, extendLoop: true})
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
	// Each lock's context is made before the heap baseline: it is the
	// harness's, not the library's.
	lctxs := make([]context.Context, n)
	cancels := make([]context.CancelFunc, n)
	for i := range lctxs {
		lctxs[i], cancels[i] = context.WithCancel(ctx)
		// A child made and cancelled now allocates the context's table of
		// children, which the library's own child would otherwise allocate
		// after the baseline.
		_, prime := context.WithCancel(lctxs[i])
		prime()
	}
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

	// A Lock call that has not returned after 5 s is cancelled and tried
	// again, as a careful caller would: a call that never returns (seen with
	// rueidislock under this load: after a client-side timeout it waits for
	// an invalidation that does not come) must not stall the run. The lock's
	// context must stay live while it is held (both libraries end a hold
	// with it), so a timer cancels it only if Lock is still waiting.
	t0 := time.Now()
	deadline := t0.Add(acquireBudget(e))
	var retries, failed atomic.Int64
	var firstErr atomic.Value
	parallel(64, n, func(i int) {
		for time.Now().Before(deadline) {
			timer := time.AfterFunc(5*time.Second, cancels[i])
			h, err := cl.Lock(lctxs[i], lockNames[i])
			if timer.Stop() && err == nil {
				hs[i] = h
				return
			}
			if err == nil {
				err = fmt.Errorf("acquired after its 5 s timeout")
				release(h)
			}
			cancels[i]()
			lctxs[i], cancels[i] = context.WithCancel(ctx)
			firstErr.CompareAndSwap(nil, fmt.Sprint(err))
			retries.Add(1)
		}
		failed.Add(1)
	})
	acquired := time.Since(t0)
	heldN := n - int(failed.Load())
	if r := retries.Load(); r > 0 {
		e.notef(scenario+"/%s: %d Lock calls failed or timed out and were retried, first: %v", lib, r, firstErr.Load())
	}
	if heldN == 0 {
		return fmt.Errorf("no lock acquired within %v", acquireBudget(e))
	}
	if heldN < n {
		e.notef(scenario+"/%s: only %d of %d locks acquired within %v; the figures are for those", lib, heldN, n, acquireBudget(e))
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	atGrant := m1.HeapAlloc

	c0, stats0, k0 := ctr.snapshot(), e.snapshot(), ctr.evalKeys.Load()
	var perNode0 nodeScripts
	if e.cl != nil {
		perNode0 = e.cl.scriptsByNode()
	}
	cpu, w0 := e.startCPU(), time.Now()
	// The heap of the locks held, once every library has settled into
	// holding (holdfast folds a quiet hold into a small record after a
	// second): the mean of samples through the window's second half,
	// since renewals in flight come and go with the renewal period. The
	// GCs the samples take count in the CPU figures of every library alike.
	const samples = 4
	var heldHeap float64
	time.Sleep(window / 2)
	for range samples {
		time.Sleep(window / 2 / samples)
		runtime.GC()
		runtime.ReadMemStats(&m1)
		heldHeap += float64(m1.HeapAlloc) / samples
	}
	k1, w1 := ctr.evalKeys.Load(), time.Now()
	usageWin := cpu.stop()
	usage := usageWin.report(float64(k1-k0), "renewed key")
	if k1 == k0 {
		// holdfast's per-node renewal calls on a cluster name their keys
		// in ARGV (numkeys 0): count the renewals due instead.
		due := float64(heldN) * w1.Sub(w0).Seconds() / (renewalWatchdog / 3).Seconds()
		usage = usageWin.report(due, "renewal due")
	}
	c1, stats1 := ctr.snapshot(), e.snapshot()
	var perNode1 nodeScripts
	if e.cl != nil {
		perNode1 = e.cl.scriptsByNode()
	}
	lostN := 0
	for _, h := range hs {
		if h != nil && lost(h) {
			lostN++
		}
	}
	cmds := steady(countsDelta(c0, c1))
	secs := w1.Sub(w0).Seconds()
	e.res.add(scenario, lib, "renewal_commands_per_s", float64(sumCalls(cmds))/secs)
	e.res.add(scenario, lib, "heap_bytes_per_lock", (heldHeap-float64(m0.HeapAlloc))/float64(heldN))
	e.res.add(scenario, lib, "heap_bytes_per_lock_at_grant", (float64(atGrant)-float64(m0.HeapAlloc))/float64(heldN))
	e.res.add(scenario, lib, "lost_holds", float64(lostN))
	atServer := statsDelta(stats0, stats1)
	scripts := scriptCalls(atServer)
	if scenario != "renewal" {
		e.res.add(scenario, lib, "client_cpu_percent", 100*float64(usageWin.self)/float64(usageWin.wall))
		e.res.add(scenario, lib, "server_script_calls_per_s", float64(scripts)/secs)
		if scripts > 0 {
			// Every hold is renewed once per renewal period (a third of
			// the watchdog).
			perSec := float64(heldN-lostN) / (renewalWatchdog / 3).Seconds()
			e.res.add(scenario, lib, "holds_per_script_call", perSec/(float64(scripts)/secs))
		}
	}
	e.notef(scenario+"/%s: %d locks acquired in %.1f s; held %v; heap %.0f B/lock (%.0f at grant); client commands %s naming %.0f keys/s (EVAL/EVALSHA numkeys); server calls incl. inside scripts %.0f/s; %s; goroutine stacks +%.0f B/lock",
		lib, heldN, acquired.Seconds(), window.Round(time.Millisecond),
		(heldHeap-float64(m0.HeapAlloc))/float64(heldN), (float64(atGrant)-float64(m0.HeapAlloc))/float64(heldN),
		fmtCounts(cmds), float64(k1-k0)/secs,
		float64(sumCalls(atServer))/secs, usage,
		(float64(m1.StackInuse)-float64(m0.StackInuse))/float64(heldN))

	if e.cl != nil {
		e.notef(scenario+"/%s: script calls per master %v/s", lib, perNode0.rates(perNode1, secs))
	}

	t1 := time.Now()
	parallel(64, n, func(i int) {
		if hs[i] != nil && !lost(hs[i]) {
			release(hs[i])
		}
		cancels[i]()
	})
	e.logf(scenario+"/%s: released %d locks in %.1f s", lib, n, time.Since(t1).Seconds())
	return nil
}

// acquireBudget bounds the time taking all the locks of a renewal round.
func acquireBudget(e *env) time.Duration {
	if e.quick {
		return 15 * time.Second
	}
	return 90 * time.Second
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

// scriptCalls counts the script calls (EVAL, EVALSHA, their read-only
// forms, FCALL) in a commandstats delta: a renewal call at the server, the
// commands its script runs not included.
func scriptCalls(m map[string]int64) int64 {
	var n int64
	for _, k := range []string{"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"} {
		n += m[k]
	}
	return n
}
