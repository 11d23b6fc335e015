package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast/holdfast"
)

const (
	semClients   = 4
	semPerClient = 16
	semPermits   = 8
	// semWork is how long each hold lasts.
	semWork = time.Millisecond
)

// runSemaphore measures holdfast's Semaphore on one hot name: 4 clients ×
// 16 goroutines taking one of 8 permits in a loop and keeping it for 1 ms of
// work. It reports grants/s, Redis commands per grant (scripts' inner
// commands included), the p99 of a grant's wait and the most holders seen
// at once (which must not pass 8), then the same load on Lock for scale.
// holdfast only: the peers have no semaphore on Redis. With -libs
// holdfast-redisson it runs again under LayoutRedisson (Redisson's
// RPermitExpirableSemaphore, and its RLock for scale).
func runSemaphore(e *env) error {
	warm, dur := 300*time.Millisecond, 2*time.Second
	if e.quick {
		warm, dur = 150*time.Millisecond, 600*time.Millisecond
	}
	for _, lib := range []string{libHoldfast, libHoldfastRedisson} {
		if !contains(e.libs, lib) {
			continue
		}
		layout := holdfast.LayoutHoldfast
		if lib == libHoldfastRedisson {
			layout = holdfast.LayoutRedisson
		}
		for r := range e.rounds() {
			var sem, ex semFigures
			var err error
			labelled("semaphore", lib, func(ctx context.Context) {
				if sem, err = semRound(ctx, e, r, semPermits, layout, warm, dur); err != nil {
					return
				}
				ex, err = semRound(ctx, e, r, 0, layout, warm, dur)
			})
			if err != nil {
				return err
			}
			e.res.add("semaphore", lib, "grants_per_s", sem.grants)
			e.res.add("semaphore", lib, "commands_per_grant", sem.commands)
			e.res.add("semaphore", lib, "grant_wait_p99_us", us(sem.waitP99))
			e.res.add("semaphore", lib, "max_holders", float64(sem.maxHolders))
			e.res.add("semaphore", lib, "lock_grants_per_s", ex.grants)
			e.res.add("semaphore", lib, "lock_commands_per_grant", ex.commands)
			e.res.add("semaphore", lib, "lock_grant_wait_p99_us", us(ex.waitP99))
			if sem.maxHolders > semPermits {
				e.notef("semaphore %s round %d: %d HOLDERS AT ONCE on %d permits", lib, r, sem.maxHolders, semPermits)
			}
			if r == e.rounds()-1 {
				e.notef("semaphore %s (last round): %.0f grants/s, %.1f commands/grant, at most %d holders at once; Lock %.0f grants/s, %.1f commands/grant",
					lib, sem.grants, sem.commands, sem.maxHolders, ex.grants, ex.commands)
			}
		}
	}
	return nil
}

type semFigures struct {
	grants, commands float64
	waitP99          time.Duration
	maxHolders       int64
}

// semRound runs the load once: with Semaphore(name, permits), or with Lock
// when permits is 0.
func semRound(ctx context.Context, e *env, round, permits int, layout holdfast.Layout, warm, dur time.Duration) (semFigures, error) {
	cls, done, err := e.holdfastClients(semClients, layout)
	defer done()
	if err != nil {
		return semFigures{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	name := fmt.Sprintf("sem:%d:%d:%v", permits, round, layout)

	var measuring, stop atomic.Bool
	var grants, holders, maxHolders atomic.Int64
	var mu sync.Mutex
	var waits []time.Duration
	var lastErr atomic.Value
	var wg sync.WaitGroup
	for g := range semClients * semPerClient {
		wg.Add(1)
		go func(c *holdfast.Client) {
			defer wg.Done()
			for !stop.Load() {
				asked := time.Now()
				var l *holdfast.Lock
				if permits > 0 {
					l = c.Semaphore(ctx, name, permits)
				} else {
					l = c.Lock(ctx, name)
				}
				if err := l.Wait(ctx); err != nil {
					if ctx.Err() == nil {
						lastErr.Store(fmt.Sprint(err))
					}
					continue
				}
				wait := time.Since(asked)
				n := holders.Add(1)
				for m := maxHolders.Load(); n > m && !maxHolders.CompareAndSwap(m, n); m = maxHolders.Load() {
				}
				time.Sleep(semWork)
				holders.Add(-1)
				l.Release(context.Background())
				if measuring.Load() {
					grants.Add(1)
					mu.Lock()
					waits = append(waits, wait)
					mu.Unlock()
				}
			}
		}(cls[g%semClients])
	}
	time.Sleep(warm)
	before := e.snapshot()
	measuring.Store(true)
	ws := time.Now()
	time.Sleep(dur)
	measuring.Store(false)
	secs := time.Since(ws).Seconds()
	after := e.snapshot()
	stop.Store(true)
	cancel()
	wg.Wait()
	if err := lastErr.Load(); err != nil {
		e.notef("semaphore/%d round %d: last error %v", permits, round, err)
	}
	mu.Lock()
	defer mu.Unlock()
	f := semFigures{
		grants:     float64(grants.Load()) / secs,
		waitP99:    percentile(waits, 99),
		maxHolders: maxHolders.Load(),
	}
	if n := grants.Load(); n > 0 && before != nil && after != nil {
		f.commands = float64(sumCalls(statsDelta(before, after))) / float64(n)
	}
	return f, nil
}
