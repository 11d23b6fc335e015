package main

import (
	"context"
	"runtime"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/holdfast/holdfast/timerwheel"
)

const wheelTimers = 1_000_000

// runTimerwheel schedules 1,000,000 timers and then cancels them all, on
// holdfast's timing wheel and with time.AfterFunc, and reports the cost of
// one schedule+cancel. The deadlines spread over 10-20 s, so no timer fires
// and the runtime's timer heap holds all of them at once, as a Client's
// wheel would.
func runTimerwheel(e *env) error {
	delays := make([]time.Duration, wheelTimers)
	for i := range delays {
		delays[i] = 10*time.Second + time.Duration(i*7919%10_000)*time.Millisecond
	}
	wheel := timerwheel.New(clock.New(), 10*time.Millisecond, 512)
	wts := make([]*timerwheel.Timer, wheelTimers)
	ats := make([]*time.Timer, wheelTimers)
	noop := func() {}

	runs := map[string]func(){
		libHoldfast: func() {
			now := time.Now()
			for i, d := range delays {
				wts[i] = wheel.Schedule(now.Add(d), noop)
			}
			for i, t := range wts {
				t.Stop()
				wts[i] = nil
			}
		},
		refAfterFunc: func() {
			for i, d := range delays {
				ats[i] = time.AfterFunc(d, noop)
			}
			for i, t := range ats {
				t.Stop()
				ats[i] = nil
			}
		},
	}
	order := []string{libHoldfast, refAfterFunc}
	for r := range e.rounds() {
		for i := range order {
			lib := order[(r+i)%len(order)]
			labelled("timerwheel", lib, func(context.Context) {
				var m0, m1 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&m0)
				t0 := time.Now()
				runs[lib]()
				el := time.Since(t0)
				runtime.ReadMemStats(&m1)
				e.res.add("timerwheel", lib, "ns_per_op", float64(el.Nanoseconds())/wheelTimers)
				e.res.add("timerwheel", lib, "bytes_per_op", float64(m1.TotalAlloc-m0.TotalAlloc)/wheelTimers)
			})
		}
	}
	if n := wheel.Len(); n != 0 {
		e.notef("timerwheel: %d timers still pending after Stop", n)
	}
	return nil
}
