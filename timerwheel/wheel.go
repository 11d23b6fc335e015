// Package timerwheel is a hashed timing wheel (Varghese & Lauck; the design
// of Netty's HashedWheelTimer): one ticker for every timer of a holdfast
// Client, O(1) schedule and cancel, driven only by an injected clock.
//
// # Concurrency
//
// Schedule and Stop may be called from any goroutine, including from inside
// a timer's function. Timer functions run on the goroutine that calls
// Advance — the wheel's own goroutine after Start, or a simulator that drives
// time itself — one after another, with no wheel lock held; they must not
// block. The Wheel owns the one goroutine Start starts; Stop ends it and
// waits for it. Timers still pending at Stop never fire.
//
// # Idle cost
//
// A started wheel ticks only while it holds timers: once a tick leaves it
// empty its goroutine stops the ticker and sleeps, and the next Schedule
// starts a new ticker (on the caller's goroutine, so that a fake clock
// advanced right after Schedule sees it) and wakes the goroutine. An idle
// Client thus costs no CPU. Ticks stay counted from the wheel's origin, so a
// restarted ticker's phase does not change when a timer is due, only how
// late within its tick it fires.
package timerwheel

import (
	"sort"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// Wheel is a hashed timing wheel. Create it with New.
type Wheel struct {
	clk    clock.Clock
	tick   time.Duration
	origin time.Time // tick k covers (origin+(k-1)·tick, origin+k·tick]
	mask   int64

	mu      sync.Mutex // guards the fields below and every pending Timer's links
	slots   []Timer    // list heads (sentinels) of each slot
	next    int64      // the first tick Advance has not processed yet
	pending int
	stop    chan struct{}
	done    chan struct{}
	// ticker is the running ticker of a started wheel, nil while it sleeps
	// (no timers) or is not started. Schedule hands a new one to the
	// goroutine through wake (1-buffered; its one sender is Schedule, which
	// sends only when ticker was nil, so a send never blocks; never closed).
	ticker *clock.Ticker
	wake   chan *clock.Ticker
}

// Timer is one scheduled function. Get one from Schedule, or arm a zero
// Timer of your own (one embedded in a longer-lived record) with Arm.
type Timer struct {
	w          *Wheel
	fn         func()
	at         int64 // deadline, nanoseconds since origin: fire order within a tick
	due        int64 // the tick it fires on
	prev, next *Timer
	pending    bool
}

// New returns a wheel with the given tick and number of slots (rounded up
// to a power of two). Time starts at clk.Now(). It starts no goroutine.
func New(clk clock.Clock, tick time.Duration, slots int) *Wheel {
	if tick <= 0 {
		panic("timerwheel: tick must be positive")
	}
	n := 1
	for n < slots {
		n <<= 1
	}
	w := &Wheel{clk: clk, tick: tick, origin: clk.Now(), mask: int64(n - 1), slots: make([]Timer, n)}
	for i := range w.slots {
		w.slots[i].prev, w.slots[i].next = &w.slots[i], &w.slots[i]
	}
	w.next = w.tickOf(w.origin)
	return w
}

// Tick returns the wheel's tick: timers fire up to one tick late.
func (w *Wheel) Tick() time.Duration { return w.tick }

// tickOf returns the first tick whose time is at or after t. It rounds up
// without adding first: t.Sub saturates at the largest Duration, and a sum
// near it would wrap to a negative tick, which fires at once.
func (w *Wheel) tickOf(t time.Time) int64 {
	d := t.Sub(w.origin)
	if d <= 0 {
		return 0
	}
	k := int64(d / w.tick)
	if d%w.tick != 0 {
		k++
	}
	return k
}

// TickOf returns the tick a timer set for at fires on, counted from the
// wheel's origin (a time already past fires on the next Advance instead):
// times with the same tick fire together, so a caller may gather them
// under one timer.
func (w *Wheel) TickOf(at time.Time) int64 { return w.tickOf(at) }

// Schedule arranges for fn to run once, at the first tick whose time is at
// or after at — never before at. A time already past fires on the next
// Advance.
func (w *Wheel) Schedule(at time.Time, fn func()) *Timer {
	t := new(Timer)
	w.Arm(t, at, fn)
	return t
}

// Arm is Schedule on a Timer the caller owns, so that a timer set again and
// again (a lock's renewal, held and released many times) allocates nothing.
// t must not be pending, and a call of its previous function must have
// returned: a Timer whose Stop returned false may still be firing. Arming a
// pending Timer panics.
func (w *Wheel) Arm(t *Timer, at time.Time, fn func()) {
	w.mu.Lock()
	if t.pending {
		w.mu.Unlock()
		panic("timerwheel: Arm of a pending Timer")
	}
	t.w, t.fn, t.at = w, fn, int64(at.Sub(w.origin))
	t.due = max(w.tickOf(at), w.next)
	head := &w.slots[t.due&w.mask]
	t.prev, t.next = head.prev, head
	head.prev.next = t
	head.prev = t
	t.pending = true
	w.pending++
	if w.ticker == nil && w.stop != nil && !w.stoppedLocked() {
		w.ticker = w.clk.Ticker(w.tick)
		w.wake <- w.ticker
	}
	w.mu.Unlock()
}

// Stop cancels the timer and reports whether this call stopped it before it
// fired. It is safe to call more than once, after the timer fired, and
// concurrently with Advance.
func (t *Timer) Stop() bool {
	w := t.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if !t.pending {
		return false
	}
	w.unlinkLocked(t)
	return true
}

func (w *Wheel) unlinkLocked(t *Timer) {
	t.prev.next = t.next
	t.next.prev = t.prev
	t.prev, t.next = nil, nil
	t.pending = false
	w.pending--
}

// Len returns the number of pending timers.
func (w *Wheel) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pending
}

// Advance fires every timer due at or before now, in deadline order.
func (w *Wheel) Advance(now time.Time) {
	var due []*Timer
	w.mu.Lock()
	last := int64(0)
	if d := now.Sub(w.origin); d > 0 {
		last = int64(d / w.tick)
	}
	if last < w.next {
		w.mu.Unlock()
		return
	}
	if last-w.next >= int64(len(w.slots)) {
		// A jump of a full round or more: visit each slot once.
		for i := range w.slots {
			due = w.collectLocked(&w.slots[i], last, due)
		}
	} else {
		for k := w.next; k <= last; k++ {
			due = w.collectLocked(&w.slots[k&w.mask], last, due)
		}
	}
	w.next = last + 1
	w.mu.Unlock()
	if len(due) > 1 {
		sort.SliceStable(due, func(i, j int) bool { return due[i].at < due[j].at })
	}
	for _, t := range due {
		t.fn()
	}
}

// collectLocked unlinks the timers of one slot that are due by tick last.
func (w *Wheel) collectLocked(head *Timer, last int64, due []*Timer) []*Timer {
	for t := head.next; t != head; {
		next := t.next
		if t.due <= last {
			w.unlinkLocked(t)
			due = append(due, t)
		}
		t = next
	}
	return due
}

// Start starts the goroutine that advances the wheel every tick of the
// injected clock while it holds timers. Call Stop to end it.
func (w *Wheel) Start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop != nil {
		return
	}
	w.stop, w.done = make(chan struct{}), make(chan struct{})
	w.wake = make(chan *clock.Ticker, 1)
	if w.pending > 0 {
		w.ticker = w.clk.Ticker(w.tick)
	}
	go w.run(w.ticker, w.stop, w.done)
}

// run advances the wheel on ticker's ticks; a nil ticker means sleep until
// Schedule sends one.
func (w *Wheel) run(ticker *clock.Ticker, stop, done chan struct{}) {
	defer close(done)
	for {
		if ticker == nil {
			select {
			case <-stop:
				return
			case ticker = <-w.wake:
			}
		}
		select {
		case <-stop:
			return
		case <-ticker.C:
			w.Advance(w.clk.Now())
			if w.sleepIfEmpty() {
				ticker = nil
			}
		}
	}
}

// sleepIfEmpty stops the ticker if no timer is pending and reports whether
// it did.
func (w *Wheel) sleepIfEmpty() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending > 0 || w.ticker == nil {
		return false
	}
	w.ticker.Stop()
	w.ticker = nil
	return true
}

func (w *Wheel) stoppedLocked() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// Stop ends the goroutine started by Start and waits for it; pending timers
// never fire. Stop is idempotent.
func (w *Wheel) Stop() {
	w.mu.Lock()
	stop, done := w.stop, w.done
	if stop == nil {
		w.mu.Unlock()
		return
	}
	if !w.stoppedLocked() {
		close(stop)
	}
	w.mu.Unlock()
	<-done
	w.mu.Lock()
	if w.ticker != nil {
		w.ticker.Stop()
		w.ticker = nil
	}
	w.mu.Unlock()
}
