package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/scripts"
)

const (
	hotClients    = 4
	hotPerClient  = 16
	hotGoroutines = hotClients * hotPerClient
)

// runHotlock measures one key fought over by 4 clients × 16 goroutines:
// handoffs to another goroutine per second, release→next-acquire latency
// (also in round trips), client commands per handoff, CPU per cycle and
// fairness.
func runHotlock(e *env) error {
	warm, dur := 300*time.Millisecond, 2*time.Second
	if e.quick {
		warm, dur = 150*time.Millisecond, 600*time.Millisecond
	}
	for r := range e.rounds() {
		rtt, err := e.roundRTT("hotlock")
		if err != nil {
			return err
		}
		// The floor runs before the libraries in even rounds and after
		// them in odd ones.
		floor := func() error {
			var err error
			labelled("hotlock", refSerialHandoff, func(ctx context.Context) {
				err = serialHandoffRound(ctx, e, warm, dur, r == e.rounds()-1)
			})
			if err != nil {
				return fmt.Errorf("%s: %w", refSerialHandoff, err)
			}
			return nil
		}
		if r%2 == 0 {
			if err := floor(); err != nil {
				return err
			}
		}
		for _, lib := range e.order(r) {
			var err error
			labelled("hotlock", lib, func(ctx context.Context) {
				err = hotlockRound(ctx, e, "hotlock", lib, r, warm, dur, rtt, openOpts{})
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
	e.noteRatios("hotlock", "handoffs_per_s", refSerialHandoff, vsBestPeer)
	return nil
}

// hold is one acquisition: who, its place in the lock's order, and when it
// was acquired (the return of Lock) and released (the call of Release: the
// moment the holder gives the lock up, so that a library whose Release
// returns only after the next holder has the lock is not credited with a
// handoff that took no time).
type hold struct {
	seq      int64
	g        int
	call     time.Time // when Lock was called
	acq, rel time.Time
}

// rttPings is the number of PINGs of a round's RTT measurement: about
// 60–150 ms on loopback.
const rttPings = 3000

// roundRTT measures the round trip of the run's server now (the median
// PING of a plain Go loop on one connection), records it under scenario as
// rtt_p50_us of refPing, and returns it: the unit of handoff_p99_rtt, taken
// in each round so that it sees the same machine load as the round.
func (e *env) roundRTT(scenario string) (time.Duration, error) {
	rtt, err := goPingRTT(e.srv.addr, rttPings)
	if err != nil {
		return 0, fmt.Errorf("PING round trip: %w", err)
	}
	if rtt <= 0 {
		return 0, fmt.Errorf("PING round trip measured as %v", rtt)
	}
	e.res.add(scenario, refPing, "rtt_p50_us", us(rtt))
	return rtt, nil
}

// hotlockRound runs one round of the hot-lock shape for scenario (hotlock,
// or fairlock with opts.fair) and records its figures under that name; rtt
// is the round's measured round trip.
func hotlockRound(ctx context.Context, e *env, scenario, lib string, round int, warm, dur, rtt time.Duration, opts openOpts) error {
	ctr := newCounter()
	var cls []locker
	defer func() {
		for _, c := range cls {
			c.Close()
		}
	}()
	for range hotClients {
		cl, err := e.open(lib, ctr, opts)
		if err != nil {
			return err
		}
		cls = append(cls, cl)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	name := fmt.Sprintf("hot:%s:%d", lib, round)

	var stop atomic.Bool
	var seq, inside, overlaps atomic.Int64
	logs := make([][]hold, hotGoroutines)
	errs := make([]int, hotGoroutines)
	var lastErr atomic.Value
	var wg sync.WaitGroup
	for g := range hotGoroutines {
		wg.Add(1)
		go func(g int, cl locker) {
			defer wg.Done()
			for !stop.Load() {
				call := time.Now()
				h, err := cl.Lock(ctx, name)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					errs[g]++
					lastErr.Store(fmt.Sprint(err))
					continue
				}
				acq := time.Now()
				n := seq.Add(1)
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				inside.Add(-1)
				rel := time.Now()
				if err := release(h); err != nil {
					errs[g]++
					lastErr.Store(fmt.Sprint(err))
				}
				logs[g] = append(logs[g], hold{seq: n, g: g, call: call, acq: acq, rel: rel})
			}
		}(g, cls[g%hotClients])
	}

	time.Sleep(warm)
	cmds0, stats0 := ctr.snapshot(), e.snapshot()
	cpu, seq0 := e.startCPU(), seq.Load()
	ws := time.Now()
	time.Sleep(dur)
	we := time.Now()
	win, cycles := cpu.stop(), float64(seq.Load()-seq0)
	cmds1, stats1 := ctr.snapshot(), e.snapshot()
	stop.Store(true)
	cancel() // wake the goroutines still waiting
	wg.Wait()

	var all []hold
	for _, l := range logs {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].seq < all[j].seq })
	// Every acquisition in the window is a cycle; it is a handoff when the
	// lock goes to another goroutine than the one that released it last,
	// and a self re-acquisition otherwise (a polling lock's releaser often
	// wins its own retry race). Latencies are the handoffs'.
	var lat, within, across []time.Duration
	perG := make([]int, hotGoroutines)
	acqs, handoffs, self := 0, 0, 0
	for k := 1; k < len(all); k++ {
		prev, cur := all[k-1], all[k]
		if cur.acq.Before(ws) || cur.acq.After(we) {
			continue
		}
		acqs++
		perG[cur.g]++
		if cur.g == prev.g {
			self++
			continue
		}
		handoffs++
		d := cur.acq.Sub(prev.rel)
		lat = append(lat, d)
		// Goroutine g uses client g % hotClients (see the loop above).
		if cur.g%hotClients == prev.g%hotClients {
			within = append(within, d)
		} else {
			across = append(across, d)
		}
	}
	if handoffs == 0 {
		return fmt.Errorf("no handoff to another goroutine in %v (%d self re-acquisitions)", dur, self)
	}
	if opts.fair {
		e.res.add(scenario, lib, "fifo_violations", float64(fifoViolations(all, ws, we)))
	}
	minG := perG[0]
	for _, n := range perG {
		minG = min(minG, n)
	}
	mean := float64(acqs) / hotGoroutines
	allCmds := countsDelta(cmds0, cmds1)
	cmds := steady(allCmds)
	secs := we.Sub(ws).Seconds()
	p99 := percentile(lat, 99)
	e.res.add(scenario, lib, "handoffs_per_s", float64(handoffs)/secs)
	e.res.add(scenario, lib, "self_reacquires_per_s", float64(self)/secs)
	e.res.add(scenario, lib, "handoff_p50_us", us(percentile(lat, 50)))
	e.res.add(scenario, lib, "handoff_p99_us", us(p99))
	e.res.add(scenario, lib, "handoff_p99_rtt", float64(p99)/float64(rtt))
	e.res.add(scenario, lib, "commands_per_handoff", float64(sumCalls(cmds))/float64(handoffs))
	e.res.add(scenario, lib, "self_reacquire_frac", float64(self)/float64(acqs))
	e.res.add(scenario, lib, "min_share", float64(minG)/mean)
	win.record(e.res, scenario, lib, cycles)
	nerr := 0
	for _, n := range errs {
		nerr += n
	}
	if nerr > 0 {
		e.notef("%s/%s round %d: %d errors, last: %v", scenario, lib, round, nerr, lastErr.Load())
	}
	if n := overlaps.Load(); n > 0 {
		e.notef("%s/%s round %d: MUTUAL EXCLUSION BROKEN %d times", scenario, lib, round, n)
	}
	if round == e.rounds()-1 {
		if n := sumCalls(allCmds) - sumCalls(cmds); n > 0 {
			e.notef("%s/%s (last round): %d connection handshake commands in the window, not counted", scenario, lib, n)
		}
		e.notef("%s/%s (last round): %s; server calls incl. inside scripts %.2f per handoff; %d cycles, %d of them handoffs to another goroutine; %s",
			scenario, lib, perUnit(cmds, float64(handoffs), "handoff"), float64(sumCalls(statsDelta(stats0, stats1)))/float64(handoffs), acqs, handoffs, win.report(cycles, "cycle"))
		e.notef("%s/%s (last round): handoffs within one client %d (p50 %v, p99 %v), to another client %d = %.1f%% (p50 %v, p99 %v)",
			scenario, lib, len(within), percentile(within, 50).Round(time.Microsecond), percentile(within, 99).Round(time.Microsecond),
			len(across), 100*float64(len(across))/float64(handoffs), percentile(across, 50).Round(time.Microsecond), percentile(across, 99).Round(time.Microsecond))
	}
	return nil
}

// serialHandoffRound measures the hot lock's floor under holdfast's
// protocol, recorded as refSerialHandoff: one goroutine on a bare rueidis
// client calls handoff.lua back to back, each call releasing one owner and
// granting the other with a new fencing token. A holdfast handoff is that
// one round trip (a new holder needs its token from Redis), and handoffs
// follow one another: no client of the protocol hands the lock over faster
// than this loop, which has no other goroutine to wake and nothing else to
// do (a library's figure can pass it by the noise between two windows of
// one round).
func serialHandoffRound(ctx context.Context, e *env, warm, dur time.Duration, last bool) error {
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{e.srv.addr}})
	if err != nil {
		return err
	}
	defer rdb.Close()
	name := "l:serial-handoff"
	keys := scripts.GrantKeys(name, scripts.FairQueueKey(name))
	owners := [2]string{scripts.Field("bench", "serial", "a"), scripts.Field("bench", "serial", "b")}
	acquire, handoff := rueidis.NewLuaScript(scripts.Acquire), rueidis.NewLuaScript(scripts.Handoff)
	if err := acquire.Exec(ctx, rdb, keys, []string{owners[0], layoutLease, "0"}).Error(); err != nil {
		return err
	}
	defer rdb.Do(context.WithoutCancel(ctx), rdb.B().Del().Key(scripts.LockKey(name)).Build())
	n := 0
	step := func() error {
		from, to := owners[n%2], owners[(n+1)%2]
		v, err := handoff.Exec(ctx, rdb, keys, []string{from, to, layoutLease}).ToArray()
		if err != nil {
			return err
		}
		if left, _ := v[0].AsInt64(); left != 0 {
			return fmt.Errorf("handoff %d: the release half answered %d", n, left)
		}
		if code, _ := v[1].AsInt64(); code != scripts.AcquireGranted {
			return fmt.Errorf("handoff %d: the acquire half answered %d", n, code)
		}
		n++
		return nil
	}
	for end := time.Now().Add(warm); time.Now().Before(end); {
		if err := step(); err != nil {
			return err
		}
	}
	usec0, err := e.admin.commandUsec()
	if err != nil {
		return err
	}
	stats0, cpu := e.snapshot(), e.startCPU()
	n0, t0 := n, time.Now()
	for end := t0.Add(dur); time.Now().Before(end); {
		if err := step(); err != nil {
			return err
		}
	}
	n1, t1 := n, time.Now()
	win, stats1 := cpu.stop(), e.snapshot()
	usec1, err := e.admin.commandUsec()
	if err != nil {
		return err
	}
	handoffs := float64(n1 - n0)
	e.res.add("hotlock", refSerialHandoff, "handoffs_per_s", handoffs/t1.Sub(t0).Seconds())
	win.record(e.res, "hotlock", refSerialHandoff, handoffs)
	if !last {
		return nil
	}
	e.notef("hotlock/%s (last round): %.1f µs of the server's CPU per handoff in EVALSHA, %.2f server calls per handoff", refSerialHandoff,
		float64(usec1-usec0)/handoffs, float64(sumCalls(statsDelta(stats0, stats1)))/handoffs)
	return nil
}
