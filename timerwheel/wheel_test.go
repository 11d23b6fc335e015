package timerwheel

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"go.uber.org/goleak"
)

const tick = 10 * time.Millisecond

func newWheel(slots int) (*Wheel, *clock.Mock, time.Time) {
	clk := clock.NewMock()
	return New(clk, tick, slots), clk, clk.Now()
}

// recorder notes the order and time at which timers fire.
type recorder struct {
	mu    sync.Mutex
	fired []int
}

func (r *recorder) fn(id int) func() {
	return func() {
		r.mu.Lock()
		r.fired = append(r.fired, id)
		r.mu.Unlock()
	}
}

func (r *recorder) got() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.fired...)
}

func TestFiresInOrderNeverEarly(t *testing.T) {
	w, _, t0 := newWheel(8)
	var r recorder
	// Deadlines in scrambled order, some sharing a tick, some rounds away.
	offsets := []time.Duration{35 * time.Millisecond, 5 * time.Millisecond, 31 * time.Millisecond,
		200 * time.Millisecond, 10 * time.Millisecond, 1200 * time.Millisecond}
	for i, d := range offsets {
		w.Schedule(t0.Add(d), r.fn(i))
	}
	cases := []struct {
		at   time.Duration
		want []int
	}{
		{4 * time.Millisecond, nil},
		{9 * time.Millisecond, nil}, // 5ms fires at the first tick at or after it: 10ms
		{10 * time.Millisecond, []int{1, 4}},
		{39 * time.Millisecond, []int{1, 4}},
		{40 * time.Millisecond, []int{1, 4, 2, 0}},
		{199 * time.Millisecond, []int{1, 4, 2, 0}},
		{200 * time.Millisecond, []int{1, 4, 2, 0, 3}},
		{1199 * time.Millisecond, []int{1, 4, 2, 0, 3}},
		{1200 * time.Millisecond, []int{1, 4, 2, 0, 3, 5}},
	}
	for _, c := range cases {
		w.Advance(t0.Add(c.at))
		if got := r.got(); !slices.Equal(got, c.want) {
			t.Fatalf("at %v fired %v, want %v", c.at, got, c.want)
		}
	}
	if w.Len() != 0 {
		t.Fatalf("%d timers left", w.Len())
	}
}

func TestNeverBeforeDeadline(t *testing.T) {
	w, _, t0 := newWheel(16)
	var now time.Time // the time of the Advance in progress
	early, fired := 0, 0
	schedule := func(at time.Time) {
		w.Schedule(at, func() {
			fired++
			if at.After(now) {
				early++
				t.Logf("deadline %v fired at %v", at.Sub(t0), now.Sub(t0))
			}
		})
	}
	for i := 0; i < 500; i++ {
		schedule(t0.Add(time.Duration(i*7919%3000) * time.Millisecond))
	}
	for step := time.Duration(0); step <= 3100*time.Millisecond; step += 3 * time.Millisecond {
		now = t0.Add(step)
		schedule(now.Add(time.Duration(step % 17))) // keep scheduling while advancing
		w.Advance(now)
	}
	now = t0.Add(time.Hour)
	w.Advance(now)
	if early > 0 {
		t.Fatalf("%d of %d timers fired before their deadline", early, fired)
	}
	if fired != 500+1034 {
		t.Fatalf("fired %d timers, want %d", fired, 500+1034)
	}
}

func TestPastDeadlineFiresOnNextAdvance(t *testing.T) {
	w, _, t0 := newWheel(8)
	w.Advance(t0.Add(time.Second))
	var r recorder
	w.Schedule(t0, r.fn(1))
	w.Schedule(t0.Add(time.Second), r.fn(2))
	w.Advance(t0.Add(time.Second))
	if len(r.got()) != 0 {
		t.Fatal("fired in a tick already processed")
	}
	w.Advance(t0.Add(time.Second + tick))
	if got := r.got(); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("fired %v", got)
	}
}

func TestStop(t *testing.T) {
	w, _, t0 := newWheel(8)
	var r recorder
	a := w.Schedule(t0.Add(20*time.Millisecond), r.fn(1))
	b := w.Schedule(t0.Add(20*time.Millisecond), r.fn(2))
	if !a.Stop() {
		t.Fatal("Stop of a pending timer returned false")
	}
	if a.Stop() {
		t.Fatal("second Stop returned true")
	}
	w.Advance(t0.Add(time.Second))
	if got := r.got(); !slices.Equal(got, []int{2}) {
		t.Fatalf("fired %v, want only the one not stopped", got)
	}
	if b.Stop() {
		t.Fatal("Stop after firing returned true")
	}
	// A stopped, fired timer's Stop must not disturb later timers in its slot.
	c := w.Schedule(t0.Add(2*time.Second), r.fn(3))
	b.Stop()
	a.Stop()
	w.Advance(t0.Add(3 * time.Second))
	if got := r.got(); !slices.Equal(got, []int{2, 3}) || c.Stop() {
		t.Fatalf("fired %v", got)
	}
}

func TestScheduleAndStopFromInsideFn(t *testing.T) {
	w, _, t0 := newWheel(8)
	var r recorder
	var victim *Timer
	w.Schedule(t0.Add(10*time.Millisecond), func() {
		r.fn(1)()
		victim.Stop()
		w.Schedule(t0.Add(5*time.Millisecond), r.fn(3)) // already past: next advance
	})
	victim = w.Schedule(t0.Add(10*time.Millisecond), r.fn(2))
	w.Advance(t0.Add(10 * time.Millisecond))
	// victim was collected in the same tick before fn 1 ran, so it fires:
	// Stop from inside a sibling cannot recall a timer already due.
	w.Advance(t0.Add(20 * time.Millisecond))
	got := r.got()
	if len(got) < 2 || got[0] != 1 || got[len(got)-1] != 3 {
		t.Fatalf("fired %v, want 1 first and the timer scheduled from inside last", got)
	}
}

func TestLongJumpFiresEverythingOnce(t *testing.T) {
	w, _, t0 := newWheel(64)
	var count atomic.Int64
	const n = 10000
	for i := 0; i < n; i++ {
		w.Schedule(t0.Add(time.Duration(i)*time.Millisecond*37), func() { count.Add(1) })
	}
	// Minutes in one step: a bounded amount of work, each timer once.
	w.Advance(t0.Add(time.Hour))
	if count.Load() != n || w.Len() != 0 {
		t.Fatalf("fired %d of %d, %d left", count.Load(), n, w.Len())
	}
	w.Advance(t0.Add(2 * time.Hour))
	if count.Load() != n {
		t.Fatal("a timer fired twice")
	}
}

func TestConcurrentScheduleStopAdvance(t *testing.T) {
	w, _, t0 := newWheel(32)
	var fired, stopped atomic.Int64
	var wg sync.WaitGroup
	const workers, each = 4, 2000
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				tm := w.Schedule(t0.Add(time.Duration(i%500)*time.Millisecond), func() { fired.Add(1) })
				if i%2 == 0 && tm.Stop() {
					stopped.Add(1)
				}
			}
		}()
	}
	done, advancerDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(advancerDone)
		for step := 0; ; step++ {
			select {
			case <-done:
				return
			default:
				w.Advance(t0.Add(time.Duration(step%600) * time.Millisecond))
			}
		}
	}()
	wg.Wait()
	close(done)
	<-advancerDone // its last Advance may still be firing what it collected
	w.Advance(t0.Add(time.Hour))
	if fired.Load()+stopped.Load() != workers*each {
		t.Fatalf("fired %d + stopped %d != %d scheduled", fired.Load(), stopped.Load(), workers*each)
	}
}

func TestStartStopGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t)
	w, clk, t0 := newWheel(8)
	fired := make(chan struct{})
	w.Start()
	w.Start() // idempotent
	w.Schedule(t0.Add(50*time.Millisecond), func() { close(fired) })
	clk.Add(50 * time.Millisecond)
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("the wheel's goroutine did not fire the timer")
	}
	late := make(chan struct{})
	w.Schedule(t0.Add(time.Second), func() { close(late) })
	w.Stop()
	w.Stop()
	clk.Add(2 * time.Second)
	select {
	case <-late:
		t.Fatal("a timer fired after Stop")
	default:
	}
}

func BenchmarkScheduleStop(b *testing.B) {
	w := New(clock.New(), tick, 512)
	now := time.Now()
	fn := func() {}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w.Schedule(now.Add(time.Duration(i%5000)*time.Millisecond), fn).Stop()
	}
}

func BenchmarkAfterFuncStop(b *testing.B) {
	fn := func() {}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		time.AfterFunc(time.Duration(i%5000)*time.Millisecond+time.Second, fn).Stop()
	}
}

// A deadline near the largest time a Duration reaches means "very long",
// never "now": rounding it up to a tick must not wrap around.
func TestFarDeadlineNeverFiresEarly(t *testing.T) {
	w, _, t0 := newWheel(8)
	var r recorder
	for i, d := range []time.Duration{math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64 - tick + 1, math.MaxInt64 / 2} {
		w.Schedule(t0.Add(d), r.fn(i))
	}
	w.Schedule(t0.Add(365*24*time.Hour).Add(math.MaxInt64), r.fn(9)) // saturates in t.Sub
	for _, at := range []time.Duration{tick, 10 * tick, 24 * time.Hour} {
		w.Advance(t0.Add(at))
		if got := r.got(); len(got) != 0 {
			t.Fatalf("at %v timers %v fired; their deadlines are centuries away", at, got)
		}
	}
	if n := w.Len(); n != 5 {
		t.Fatalf("%d timers pending, want 5", n)
	}
}

// A Timer of the caller's own is armed again and again: each arming fires
// once, a stopped arming never fires, and arming a pending Timer panics.
func TestArmReusesATimer(t *testing.T) {
	w, _, t0 := newWheel(8)
	var r recorder
	var tm Timer
	w.Arm(&tm, t0.Add(tick), r.fn(1))
	w.Advance(t0.Add(tick))
	w.Arm(&tm, t0.Add(3*tick), r.fn(2))
	if !tm.Stop() {
		t.Fatal("Stop of an armed Timer reported it was not pending")
	}
	w.Arm(&tm, t0.Add(4*tick), r.fn(3))
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Arm of a pending Timer did not panic")
			}
		}()
		w.Arm(&tm, t0.Add(5*tick), r.fn(4))
	}()
	w.Advance(t0.Add(10 * tick))
	if got := r.got(); !slices.Equal(got, []int{1, 3}) {
		t.Fatalf("fired %v, want [1 3]", got)
	}
	if w.Len() != 0 {
		t.Fatalf("Len = %d after every arming fired or stopped", w.Len())
	}
	if n := testing.AllocsPerRun(100, func() {
		w.Arm(&tm, t0.Add(20*tick), r.fn(0))
		tm.Stop()
	}); n > 1 { // the closure r.fn makes; Arm itself allocates nothing
		t.Fatalf("Arm allocates %v times", n)
	}
}

// TestTickOfIsTheFiringTick: a timer set for at fires when the wheel
// reaches TickOf(at), not a tick before.
func TestTickOfIsTheFiringTick(t *testing.T) {
	for _, d := range []time.Duration{0, 1, 5 * time.Millisecond, 10 * time.Millisecond, 11 * time.Millisecond, 95 * time.Millisecond} {
		w, _, t0 := newWheel(8)
		at := t0.Add(d)
		k := w.TickOf(at)
		var fired atomic.Bool
		w.Schedule(at, func() { fired.Store(true) })
		if k > 0 {
			w.Advance(t0.Add(time.Duration(k)*tick - 1))
			if fired.Load() {
				t.Fatalf("timer for +%v fired before tick %d", d, k)
			}
		}
		w.Advance(t0.Add(time.Duration(k) * tick))
		if !fired.Load() {
			t.Fatalf("timer for +%v did not fire at tick %d", d, k)
		}
	}
}
