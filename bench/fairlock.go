package main

import (
	"context"
	"fmt"
	"time"
)

// runFairlock is hotlock's shape (4 clients × 16 goroutines on one key)
// with holdfast's FairLock, which no peer offers: its figures sit beside
// holdfast's hotlock row, which is the price of fairness (and, with -libs
// holdfast-redisson, beside the same FairLock on Redisson's keys). It also counts
// FIFO violations: grants that overtook a request made more than
// fifoMargin earlier.
func runFairlock(e *env) error {
	warm, dur := 300*time.Millisecond, 2*time.Second
	if e.quick {
		warm, dur = 150*time.Millisecond, 600*time.Millisecond
	}
	// holdfast-redisson (asked for with -libs) is the same FairLock on
	// Redisson's RFairLock keys: its cost beside the native layout's.
	for _, lib := range []string{libHoldfast, libHoldfastRedisson} {
		if !contains(e.libs, lib) {
			continue
		}
		for r := range e.rounds() {
			rtt, err := e.roundRTT("fairlock")
			if err != nil {
				return err
			}
			labelled("fairlock", lib, func(ctx context.Context) {
				err = hotlockRound(ctx, e, "fairlock", lib, r, warm, dur, rtt, openOpts{fair: true})
			})
			if err != nil {
				return fmt.Errorf("%s: %w", lib, err)
			}
		}
	}
	return nil
}

// fifoMargin is how much earlier a request must have been made than one
// granted before it to count as overtaken. A request reaches Redis's queue
// some time after the call (a client's waiters take their places one
// round trip after another), so calls closer than this are not ordered.
const fifoMargin = 10 * time.Millisecond

// fifoViolations counts the grants in [ws, we] made while a request called
// more than fifoMargin earlier was still waiting (it was granted later).
// holds must be sorted by grant order.
func fifoViolations(holds []hold, ws, we time.Time) int {
	n := 0
	// earliest[k] is the earliest call among holds granted after k.
	earliest := make([]time.Time, len(holds))
	var first time.Time
	for k := len(holds) - 1; k >= 0; k-- {
		earliest[k] = first
		if first.IsZero() || holds[k].call.Before(first) {
			first = holds[k].call
		}
	}
	for k, h := range holds {
		if h.acq.Before(ws) || h.acq.After(we) || earliest[k].IsZero() {
			continue
		}
		if earliest[k].Add(fifoMargin).Before(h.call) {
			n++
		}
	}
	return n
}
