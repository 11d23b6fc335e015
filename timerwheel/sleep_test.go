package timerwheel

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"go.uber.org/goleak"
)

// waitFor polls cond on the real clock: the wheel's goroutine acts on a
// fake clock's alarm asynchronously.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// stepTo advances the fake clock to t0+to in steps of step, checking after
// each that the wheel's goroutine has not woken more than wakeups times.
func stepTo(t *testing.T, w *Wheel, clk *clock.Mock, t0 time.Time, to, step time.Duration, wakeups int64) {
	t.Helper()
	for now := clk.Now().Sub(t0); now < to; now = clk.Now().Sub(t0) {
		clk.Add(min(step, to-now))
		if n := w.Wakeups(); n > wakeups {
			t.Fatalf("at +%v the wheel woke %d times, want at most %d", clk.Now().Sub(t0), n, wakeups)
		}
	}
}

// With one timer 5 s away the wheel does not wake before its tick, and
// wakes once then.
func TestSleepsUntilTheDueTick(t *testing.T) {
	defer goleak.VerifyNone(t)
	w, clk, t0 := newWheel(64) // 64 ticks: 5 s is several rounds away
	w.Start()
	defer w.Stop()
	var fired atomic.Bool
	w.Schedule(t0.Add(5*time.Second), func() { fired.Store(true) })
	if got, want := w.armedAt(), w.TickOf(t0.Add(5*time.Second)); got != want {
		t.Fatalf("alarm set for tick %d, want %d", got, want)
	}
	stepTo(t, w, clk, t0, 4900*time.Millisecond, 100*time.Millisecond, 0)
	stepTo(t, w, clk, t0, 5*time.Second-time.Millisecond, time.Millisecond, 0)
	clk.Add(time.Millisecond - 1)
	if fired.Load() || w.Wakeups() != 0 {
		t.Fatalf("1ns before the deadline: fired %v, %d wake-ups", fired.Load(), w.Wakeups())
	}
	clk.Add(1)
	waitFor(t, "the timer fires", fired.Load)
	waitFor(t, "the empty wheel clears its alarm", func() bool { return !w.alarmSet() })
	if n := w.Wakeups(); n != 1 {
		t.Fatalf("%d wake-ups for one timer, want 1", n)
	}
	// Nothing left: time passes without a wake-up.
	stepTo(t, w, clk, t0, time.Minute, time.Second, 1)
}

// Schedule of a timer earlier than the alarm sets the alarm earlier; the
// later timer is still served by the next alarm.
func TestEarlierScheduleRearms(t *testing.T) {
	defer goleak.VerifyNone(t)
	w, clk, t0 := newWheel(512)
	w.Start()
	defer w.Stop()
	var r recorder
	w.Schedule(t0.Add(5*time.Second), r.fn(5))
	w.Schedule(t0.Add(3*time.Second), r.fn(3))
	w.Schedule(t0.Add(4*time.Second), r.fn(4)) // later than the alarm: no change
	if got, want := w.armedAt(), w.TickOf(t0.Add(3*time.Second)); got != want {
		t.Fatalf("alarm set for tick %d, want %d (the earliest timer's)", got, want)
	}
	w.Schedule(t0.Add(time.Second+5*time.Millisecond), r.fn(1))
	if got, want := w.armedAt(), w.TickOf(t0.Add(time.Second+5*time.Millisecond)); got != want {
		t.Fatalf("alarm set for tick %d, want %d after an earlier Schedule", got, want)
	}
	stepTo(t, w, clk, t0, time.Second, 100*time.Millisecond, 0)
	clk.Add(10 * time.Millisecond)
	waitFor(t, "the earliest timer fires", func() bool { return len(r.got()) == 1 })
	waitFor(t, "the alarm moves to the next timer", func() bool { return w.armedAt() == w.TickOf(t0.Add(3*time.Second)) })
	for i, at := range []time.Duration{3 * time.Second, 4 * time.Second, 5 * time.Second} {
		stepTo(t, w, clk, t0, at-time.Millisecond, 100*time.Millisecond, int64(i+1))
		clk.Add(time.Millisecond)
		waitFor(t, "the next timer fires", func() bool { return len(r.got()) == i+2 })
	}
	if got := r.got(); !slices.Equal(got, []int{1, 3, 4, 5}) {
		t.Fatalf("fired %v", got)
	}
	if n := w.Wakeups(); n != 4 {
		t.Fatalf("%d wake-ups for four timers on four ticks, want 4", n)
	}
}

// Stop of the earliest timer leaves the alarm set for it: the wheel wakes
// once, fires nothing, and sleeps until the next timer.
func TestCancelEarliestWakesOnceHarmlessly(t *testing.T) {
	defer goleak.VerifyNone(t)
	w, clk, t0 := newWheel(512)
	w.Start()
	defer w.Stop()
	var r recorder
	early := w.Schedule(t0.Add(time.Second), r.fn(1))
	w.Schedule(t0.Add(5*time.Second), r.fn(2))
	if !early.Stop() {
		t.Fatal("Stop of a pending timer returned false")
	}
	stepTo(t, w, clk, t0, time.Second, 100*time.Millisecond, 1)
	waitFor(t, "the alarm moves to the remaining timer", func() bool { return w.armedAt() == w.TickOf(t0.Add(5*time.Second)) })
	harmless := w.Wakeups()
	if harmless > 1 {
		t.Fatalf("%d wake-ups for a cancelled timer", harmless)
	}
	stepTo(t, w, clk, t0, 5*time.Second-time.Millisecond, 100*time.Millisecond, harmless)
	if len(r.got()) != 0 {
		t.Fatalf("fired %v before the deadline", r.got())
	}
	clk.Add(time.Millisecond)
	waitFor(t, "the remaining timer fires", func() bool { return len(r.got()) == 1 })
	if got := r.got(); !slices.Equal(got, []int{2}) {
		t.Fatalf("fired %v, want only the timer not stopped", got)
	}
	if n := w.Wakeups(); n != harmless+1 {
		t.Fatalf("%d wake-ups, want %d", n, harmless+1)
	}
}

// A timer fires when the fake clock reaches the end of its tick, not
// before, and timers of one tick fire together in deadline order.
func TestAlarmAtTheEndOfTheTick(t *testing.T) {
	defer goleak.VerifyNone(t)
	w, clk, t0 := newWheel(8)
	w.Start()
	defer w.Stop()
	var r recorder
	w.Schedule(t0.Add(17*time.Millisecond), r.fn(2))
	w.Schedule(t0.Add(11*time.Millisecond), r.fn(1))
	w.Schedule(t0.Add(20*time.Millisecond), r.fn(3))
	stepTo(t, w, clk, t0, 19*time.Millisecond, time.Millisecond, 0)
	if len(r.got()) != 0 {
		t.Fatalf("fired %v before the tick's end", r.got())
	}
	clk.Add(time.Millisecond)
	waitFor(t, "the tick's timers fire", func() bool { return len(r.got()) == 3 })
	if got := r.got(); !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("fired %v, want deadline order", got)
	}
}

// One jump of a fake clock over many occupied ticks fires every timer up
// to its new time, in order, with no further step: the goroutine catches
// up however far the clock moved while it set its alarm.
func TestOneJumpFiresEveryTickPassed(t *testing.T) {
	defer goleak.VerifyNone(t)
	w, clk, t0 := newWheel(16)
	w.Start()
	defer w.Stop()
	var r recorder
	const n = 100
	for i := range n {
		w.Schedule(t0.Add(time.Duration(i+1)*7*time.Millisecond), r.fn(i))
	}
	w.Schedule(t0.Add(time.Hour), r.fn(-1))
	clk.Add(time.Second)
	waitFor(t, "every timer passed fires", func() bool { return len(r.got()) == n })
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	if got := r.got(); !slices.Equal(got, want) {
		t.Fatalf("fired %v", got)
	}
	waitFor(t, "the alarm is set for the last timer", func() bool { return w.armedAt() == w.TickOf(t0.Add(time.Hour)) })
}

// A timer whose tick has ended already wakes a sleeping wheel at once: it
// needs no further step of a fake clock.
func TestPastDeadlineWakesASleepingWheel(t *testing.T) {
	defer goleak.VerifyNone(t)
	w, clk, t0 := newWheel(8)
	w.Start()
	defer w.Stop()
	clk.Add(time.Second)
	fired := make(chan struct{})
	w.Schedule(t0.Add(500*time.Millisecond), func() { close(fired) })
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("a timer already due did not fire")
	}
}

// Start of a wheel that holds timers sets the alarm for the earliest.
func TestStartArmsForPendingTimers(t *testing.T) {
	defer goleak.VerifyNone(t)
	w, clk, t0 := newWheel(8)
	var fired atomic.Bool
	w.Schedule(t0.Add(time.Second), func() { fired.Store(true) })
	w.Schedule(t0.Add(2*time.Second), func() {})
	if w.alarmSet() {
		t.Fatal("a wheel not started has an alarm")
	}
	w.Start()
	defer w.Stop()
	if got, want := w.armedAt(), w.TickOf(t0.Add(time.Second)); got != want {
		t.Fatalf("alarm set for tick %d, want %d", got, want)
	}
	clk.Add(time.Second)
	waitFor(t, "the timer fires", fired.Load)
}

// After Stop the alarm is cleared and no Schedule sets it again.
func TestStopClearsTheAlarm(t *testing.T) {
	defer goleak.VerifyNone(t)
	w, clk, t0 := newWheel(8)
	w.Start()
	w.Schedule(t0.Add(time.Second), func() { t.Error("fired after Stop") })
	w.Stop()
	w.Schedule(t0.Add(500*time.Millisecond), func() { t.Error("fired after Stop") })
	if w.alarmSet() {
		t.Fatal("alarm set after Stop")
	}
	clk.Add(2 * time.Second)
	time.Sleep(10 * time.Millisecond)
}

// On the real clock, under concurrent Schedule and Stop from many
// goroutines and from inside timers: every timer not stopped fires once,
// none before its deadline, and the goroutine ends at Stop.
func TestRealClockConcurrentNeverEarly(t *testing.T) {
	defer goleak.VerifyNone(t)
	clk := clock.New()
	w := New(clk, time.Millisecond, 64)
	w.Start()
	var early, fired, stopped atomic.Int64
	var all sync.WaitGroup
	schedule := func(d time.Duration, then func()) *Timer {
		at := clk.Now().Add(d)
		all.Add(1)
		return w.Schedule(at, func() {
			if clk.Now().Before(at) {
				early.Add(1)
			}
			fired.Add(1)
			if then != nil {
				then()
			}
			all.Done()
		})
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				d := time.Duration((i*7919+g*31)%40) * time.Millisecond / 2
				var then func()
				if i%5 == 0 { // reschedule from inside, sometimes already due
					then = func() { schedule(time.Duration(i%3)*time.Millisecond, nil) }
				}
				tm := schedule(d, then)
				if i%3 == 0 && tm.Stop() {
					stopped.Add(1)
					all.Done()
				}
				if i%50 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	done := make(chan struct{})
	go func() { all.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("timers left unfired: %d pending", w.Len())
	}
	w.Stop()
	if early.Load() > 0 {
		t.Fatalf("%d of %d timers fired before their deadline", early.Load(), fired.Load())
	}
	t.Logf("fired %d, stopped %d, %d wake-ups", fired.Load(), stopped.Load(), w.Wakeups())
}

// BenchmarkScheduleStopStarted is BenchmarkScheduleStop on a started wheel,
// as a Client's is: Schedule may set the alarm.
func BenchmarkScheduleStopStarted(b *testing.B) {
	w := New(clock.New(), tick, 512)
	w.Start()
	defer w.Stop()
	now := time.Now()
	fn := func() {}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w.Schedule(now.Add(time.Second+time.Duration(i%5000)*time.Millisecond), fn).Stop()
	}
}
