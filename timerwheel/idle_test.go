package timerwheel

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// A started wheel with no timers has no alarm; a Schedule sets one at once
// (a fake clock advanced right after sees it), and the wake-up that empties
// the wheel clears it again.
func TestSleepsWhenEmptyAndWakesOnSchedule(t *testing.T) {
	defer goleak.VerifyNone(t)
	w, clk, t0 := newWheel(8)
	w.Start()
	defer w.Stop()
	if w.alarmSet() {
		t.Fatal("an empty wheel has an alarm after Start")
	}
	clk.Add(time.Hour) // time passes while it sleeps
	for round := 0; round < 3; round++ {
		fired := make(chan struct{})
		at := clk.Now().Add(50 * time.Millisecond)
		w.Schedule(at, func() { close(fired) })
		if !w.alarmSet() {
			t.Fatalf("round %d: Schedule did not set the alarm", round)
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
		for w.alarmSet() {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the alarm is still set with no timers", round)
			}
			clk.Add(tick)
			time.Sleep(time.Millisecond)
		}
	}
}
