package timerwheel

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func (w *Wheel) ticking() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ticker != nil
}

// A started wheel with no timers has no ticker; a Schedule starts one at
// once (a fake clock advanced right after sees it), and the tick that
// empties the wheel stops it again.
func TestSleepsWhenEmptyAndWakesOnSchedule(t *testing.T) {
	defer goleak.VerifyNone(t)
	w, clk, t0 := newWheel(8)
	w.Start()
	defer w.Stop()
	if w.ticking() {
		t.Fatal("an empty wheel ticks after Start")
	}
	clk.Add(time.Hour) // time passes while it sleeps
	for round := 0; round < 3; round++ {
		fired := make(chan struct{})
		at := clk.Now().Add(50 * time.Millisecond)
		w.Schedule(at, func() { close(fired) })
		if !w.ticking() {
			t.Fatalf("round %d: Schedule did not start the ticker", round)
		}
		// Step one tick at a time: the goroutine must see each.
		for !clk.Now().After(at.Add(tick)) {
			select {
			case <-fired:
			default:
				clk.Add(tick)
				continue
			}
			break
		}
		select {
		case <-fired:
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: timer at %v not fired by %v", round, at.Sub(t0), clk.Now().Sub(t0))
		}
		deadline := time.Now().Add(5 * time.Second)
		for w.ticking() {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the ticker still runs with no timers", round)
			}
			clk.Add(tick)
			time.Sleep(time.Millisecond)
		}
	}
}
