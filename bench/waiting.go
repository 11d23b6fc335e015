package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

const (
	waitClients = 4
	waiters     = 100
	// waitHold is how long the holder keeps the lock while the waiters
	// wait: the window of the waiting target (≤ 20 commands in 5 s).
	waitHold = 5 * time.Second
)

// runWaiting measures what 100 waiters cost while one holder keeps the lock
// for 5 s, and how fast they all get it once it is released.
func runWaiting(e *env) error {
	hold, rounds := waitHold, 3
	if e.quick {
		rounds = 1
	}
	for r := range rounds {
		for _, lib := range e.order(r) {
			var err error
			labelled("waiting", lib, func(ctx context.Context) {
				err = waitingRound(ctx, e, lib, r, rounds, hold)
			})
			if err != nil {
				return fmt.Errorf("%s: %w", lib, err)
			}
		}
	}
	return nil
}

func waitingRound(ctx context.Context, e *env, lib string, round, rounds int, holdFor time.Duration) error {
	// The holder has a client of its own, counted apart, so its renewals
	// are not charged to the waiters.
	holderCtr, waiterCtr := newCounter(), newCounter()
	holder, err := e.open(lib, holderCtr, openOpts{})
	if err != nil {
		return err
	}
	defer holder.Close()
	var cls []locker
	defer func() {
		for _, c := range cls {
			c.Close()
		}
	}()
	for range waitClients {
		cl, err := e.open(lib, waiterCtr, openOpts{})
		if err != nil {
			return err
		}
		cls = append(cls, cl)
	}
	ctx, cancel := context.WithTimeout(ctx, holdFor+time.Minute)
	defer cancel()
	name := fmt.Sprintf("wait:%s:%d", lib, round)
	// Each waiters' client takes and releases a lock of its own first, as a
	// long-lived client has: the connections it opens for any lock are then
	// open, and the window sees only what waiting costs (a connection opened
	// because callers wait is counted, handshake and all).
	for i, cl := range cls {
		if err := useOnce(ctx, cl, fmt.Sprintf("%s:warm:%d", name, i)); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}

	// The same clients, warm and with nobody waiting, for as long as the
	// waiters will wait: what they send anyway (keep-alive PINGs of their
	// idle connections), which the waiting window's count includes.
	i0, idleCPU := waiterCtr.snapshot(), e.startCPU()
	time.Sleep(holdFor)
	idle, idleWin := countsDelta(i0, waiterCtr.snapshot()), idleCPU.stop()
	e.res.add("waiting", lib, "idle_commands", float64(sumCalls(idle)))

	h, err := holder.Lock(ctx, name)
	if err != nil {
		return fmt.Errorf("holder: %w", err)
	}
	held := time.Now()
	w0, hc0, stats0, waitCPU := waiterCtr.snapshot(), holderCtr.snapshot(), e.snapshot(), e.startCPU()

	type result struct {
		acq, rel time.Time
		err      error
	}
	res := make([]result, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Add(1)
		go func(i int, cl locker) {
			defer wg.Done()
			hw, err := cl.Lock(ctx, name)
			if err != nil {
				res[i].err = err
				return
			}
			res[i].acq = time.Now()
			res[i].err = release(hw)
			res[i].rel = time.Now()
		}(i, cls[i%waitClients])
	}

	time.Sleep(time.Until(held.Add(holdFor)))
	w1, hc1, stats1, waitWin := waiterCtr.snapshot(), holderCtr.snapshot(), e.snapshot(), waitCPU.stop()
	released := time.Now()
	if err := release(h); err != nil {
		return fmt.Errorf("holder release: %w", err)
	}
	wg.Wait()

	var last time.Time
	early, failed := 0, 0
	var firstErr error
	for _, r := range res {
		if r.err != nil {
			failed++
			if firstErr == nil {
				firstErr = r.err
			}
			continue
		}
		if r.acq.Before(released) {
			early++
		}
		if r.rel.After(last) {
			last = r.rel
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d waiters failed, first: %v", failed, waiters, firstErr)
	}
	// Every command the waiters' clients wrote in the window counts: lock
	// calls, subscriptions, keep-alive PINGs, and the handshakes of any
	// connection a client opened because its callers began to wait.
	wc := countsDelta(w0, w1)
	e.res.add("waiting", lib, "waiter_commands", float64(sumCalls(wc)))
	e.res.add("waiting", lib, "drain_ms", float64(last.Sub(released))/float64(time.Millisecond))
	// The process's CPU (bench's own, the holder's client included), idle
	// and while the waiters wait: in the notes.
	idlePct, waitPct := 100*float64(idleWin.self)/float64(idleWin.wall), 100*float64(waitWin.self)/float64(waitWin.wall)
	e.notef("waiting/%s round %d: bench process CPU %.2f%% of a core while %d waiters wait %v, %.2f%% with the same clients idle", lib, round, waitPct, waiters, holdFor, idlePct)
	if early > 0 {
		e.notef("waiting/%s round %d: MUTUAL EXCLUSION BROKEN: %d waiters acquired before the holder released", lib, round, early)
	}
	if round == rounds-1 {
		hc := countsDelta(hc0, hc1)
		e.notef("waiting/%s (last round, %v hold): waiters' clients sent %d commands (%d of them handshakes): %s; the holder sent %d more; server calls incl. inside scripts, holder included: %d; the same clients idle for as long, before: %s",
			lib, holdFor, sumCalls(wc), sumCalls(wc)-sumCalls(steady(wc)), fmtCounts(wc), sumCalls(hc), sumCalls(statsDelta(stats0, stats1)), fmtCounts(idle))
	}
	return nil
}

func fmtCounts(m map[string]int64) string {
	s := ""
	for i, k := range names(m) {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%s=%d", k, m[k])
	}
	if s == "" {
		return "none"
	}
	return s
}
