package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// scaleSizes are the hold counts of the scale scenario: what
// keeping locks costs as their number grows.
var scaleSizes = []int{1_000, 10_000, 100_000}

// scaleMasters is the number of masters of the scale scenario's cluster.
const scaleMasters = 3

// runScale holds each of scaleSizes locks in turn with the watchdog, as
// the renewal scenario does (WatchdogTimeout 3 s, renewed every second),
// first on the one server, then on a 3-master Redis Cluster that it starts
// (redis-cli --cluster create), and records per size, as scenario
// scale-1k … scale-100k and scale-cluster-1k …: heap per hold, renewal
// commands per second at the client, script calls per second at the
// server(s) (INFO commandstats, summed over the masters), holds renewed
// per script call, the client's CPU (percent of a core) and lost holds.
// holdfast and rueidislock renew by themselves; redsync has no watchdog,
// so its rows are what a redsync user writes: locks of 3 s, each with a
// goroutine calling Extend every second, up to scaleRedsyncMax holds.
// redislock is left out. One round per size; -quick stops at 10,000.
func runScale(e *env) error {
	libs := []string{}
	for _, l := range e.libs {
		if l == libHoldfast || l == libRueidislock || l == libRedsync {
			libs = append(libs, l)
		}
	}
	sizes := []int{}
	for _, n := range scaleSizes {
		if !e.quick || n <= 10_000 {
			sizes = append(sizes, n)
		}
	}
	round := func(scenario, lib string, n int) error {
		settle()
		var err error
		labelled(scenario, lib, func(ctx context.Context) {
			err = renewalRound(ctx, e, scenario, lib, n, renewalWatchdog)
		})
		if err != nil {
			return fmt.Errorf("%s %s: %w", scenario, lib, err)
		}
		e.flush()
		return nil
	}
	for _, n := range sizes {
		for _, lib := range scaleLibs(libs, n) {
			if err := round(scaleScenario(n, false), lib, n); err != nil {
				return err
			}
		}
	}
	cl, err := startRedisCluster(scaleMasters)
	if err != nil {
		return err
	}
	e.cl = cl
	e.notef("scale-cluster: %d masters (no replicas) on %v, started with redis-cli --cluster create", scaleMasters, cl.addrs)
	err = func() error {
		defer func() { e.cl = nil; cl.stop() }()
		for _, n := range sizes {
			for _, lib := range scaleLibs(libs, n) {
				if err := round(scaleScenario(n, true), lib, n); err != nil {
					return err
				}
			}
		}
		return nil
	}()
	if err != nil {
		return err
	}
	return runScaleWaiters(e)
}

// scaleRedsyncMax is the most holds redsync's rows take. At 100,000 its
// Extend loops (100,000 calls/s) left it no room to take the locks on this
// 2-core machine: 46,189 (one server) and 58,071 (cluster) of 100,000
// acquired within the 90 s budget, and three minutes of the run gone.
const scaleRedsyncMax = 10_000

// scaleLibs are the libraries of libs that run n holds.
func scaleLibs(libs []string, n int) []string {
	var out []string
	for _, l := range libs {
		if l != libRedsync || n <= scaleRedsyncMax {
			out = append(out, l)
		}
	}
	return out
}

// scaleScenario names the figures of n holds, on the one server or on the
// cluster.
func scaleScenario(n int, onCluster bool) string {
	if onCluster {
		return fmt.Sprintf("scale-cluster-%dk", n/1000)
	}
	return fmt.Sprintf("scale-%dk", n/1000)
}

// scaleScenarios are the names the scale scenario's figures go under.
func scaleScenarios() []string {
	var out []string
	for _, onCluster := range []bool{false, true} {
		for _, n := range scaleSizes {
			out = append(out, scaleScenario(n, onCluster))
		}
	}
	return append(out, scaleWaitersScenario)
}

// Waiters on many names: scaleNames names, each held by one client while
// scalePerName callers of another client wait for it, for scaleWait.
const (
	scaleNames   = 1_000
	scalePerName = 10
	scaleWait    = 3 * time.Second
)

// scaleWaitersScenario is the name the waiters' figures go under.
const scaleWaitersScenario = "scale-waiters"

// runScaleWaiters measures what 10,000 waiters on 1,000 names cost their
// client while they wait (commands it writes, subscriptions among them,
// its process's CPU) and how long they take to drain once the holds are
// released. holdfast and rueidislock wait for a notification; redsync and
// redislock poll each waiter every 16 ms (some 600,000 commands/s here)
// and are left out.
func runScaleWaiters(e *env) error {
	for _, lib := range e.libs {
		if lib != libHoldfast && lib != libRueidislock {
			continue
		}
		var err error
		labelled(scaleWaitersScenario, lib, func(ctx context.Context) {
			err = scaleWaitersRound(ctx, e, lib)
		})
		if err != nil {
			return fmt.Errorf("%s %s: %w", scaleWaitersScenario, lib, err)
		}
		e.flush()
	}
	return nil
}

func scaleWaitersRound(ctx context.Context, e *env, lib string) error {
	holderCtr, waiterCtr := newCounter(), newCounter()
	holder, err := e.open(lib, holderCtr, openOpts{})
	if err != nil {
		return err
	}
	defer holder.Close()
	waiter, err := e.open(lib, waiterCtr, openOpts{})
	if err != nil {
		return err
	}
	defer waiter.Close()
	ctx, cancel := context.WithTimeout(ctx, scaleWait+2*time.Minute)
	defer cancel()
	if err := useOnce(ctx, waiter, "sw:warm:"+lib); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	names := make([]string, scaleNames)
	hs := make([]held, scaleNames)
	for i := range names {
		names[i] = fmt.Sprintf("sw:%s:%d", lib, i)
	}
	var herr error
	var mu sync.Mutex
	parallel(64, scaleNames, func(i int) {
		h, err := holder.Lock(ctx, names[i])
		mu.Lock()
		defer mu.Unlock()
		hs[i] = h
		if err != nil && herr == nil {
			herr = err
		}
	})
	if herr != nil {
		return fmt.Errorf("holder: %w", herr)
	}
	w0, cpu := waiterCtr.snapshot(), e.startCPU()
	var wg sync.WaitGroup
	var failed atomic.Int64
	var last atomic.Int64
	var firstErr atomic.Value
	for i := range scaleNames * scalePerName {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			h, err := waiter.Lock(ctx, name)
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, fmt.Sprint(err))
				return
			}
			release(h)
			now := time.Now().UnixNano()
			for {
				l := last.Load()
				if now <= l || last.CompareAndSwap(l, now) {
					break
				}
			}
		}(names[i%scaleNames])
	}
	time.Sleep(scaleWait)
	w1, win := waiterCtr.snapshot(), cpu.stop()
	released := time.Now()
	parallel(64, scaleNames, func(i int) { release(hs[i]) })
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d of %d waiters failed, first: %v", n, scaleNames*scalePerName, firstErr.Load())
	}
	wc := countsDelta(w0, w1)
	var subs int64
	for k, v := range wc {
		switch k {
		case "subscribe", "ssubscribe", "psubscribe":
			subs += v
		}
	}
	e.res.add(scaleWaitersScenario, lib, "waiter_commands", float64(sumCalls(wc)))
	e.res.add(scaleWaitersScenario, lib, "subscriptions", float64(subs))
	e.res.add(scaleWaitersScenario, lib, "client_cpu_percent", 100*float64(win.self)/float64(win.wall))
	e.res.add(scaleWaitersScenario, lib, "drain_ms", float64(time.Unix(0, last.Load()).Sub(released))/float64(time.Millisecond))
	e.notef("%s/%s: %d waiters on %d names for %v: the waiters' client wrote %s; %s", scaleWaitersScenario, lib,
		scaleNames*scalePerName, scaleNames, scaleWait, fmtCounts(wc), win.report(float64(scaleNames*scalePerName), "waiter"))
	return nil
}

// settle lets what the round before left behind end before the next round
// measures: goroutines still exiting (a closed client's, a peer's 100,000
// Extend or watch loops) and the garbage they free. Without it the first
// cluster round after the 100,000-hold rounds read a heap below its
// baseline and 9 % of a core for 1,000 holds. It waits until the goroutine
// count stops falling (up to 5 s), then collects.
func settle() {
	deadline := time.Now().Add(5 * time.Second)
	prev := runtime.NumGoroutine()
	for time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		n := runtime.NumGoroutine()
		if n >= prev {
			break
		}
		prev = n
	}
	runtime.GC()
	debug.FreeOSMemory()
}
