// Package timerwheel is a hashed timing wheel (Varghese & Lauck; the design
// of Netty's HashedWheelTimer): one clock timer for every timer of a
// holdfast Client, O(1) schedule and cancel, driven only by an injected
// clock. It is holdfast's machinery, importable only because the module
// keeps its packages at the top level: it has no compatibility promise and
// may change in any release. Use package holdfast.
//
// # Concurrency
//
// Schedule and Stop may be called from any goroutine, including from inside
// a timer's function. Timer functions run on the goroutine that calls
// Advance — the wheel's own goroutine after Start, or a simulator that drives
// time itself — one after another, with no wheel lock held; they must not
// block. The Wheel owns the one goroutine Start starts; Stop ends it and
// waits for it. Timers still pending at Stop never fire. The function of the
// wheel's alarm (see below), which the clock runs on a goroutine of its own,
// only signals the wheel's goroutine.
//
// # Idle cost
//
// A started wheel sleeps until its next timer is due: its goroutine waits
// for an alarm — one clock timer of the injected clock (AfterFunc), set for
// the end of the earliest tick that holds a timer — instead of waking every
// tick. Between timers it costs no CPU, however many timers it holds and
// however far off they are; an empty wheel has no alarm at all. After each
// wake-up the goroutine fires what is due, finds the next occupied tick (a
// scan of a bitmap of occupied slots from the current tick, a round at
// most) and sets the alarm for it. Schedule of a timer due before the alarm
// sets the alarm earlier, on the caller's goroutine, so that a fake clock
// advanced right after Schedule sees it. Stop of a timer leaves the alarm
// as it is: cancelling the earliest timer costs at most one wake-up that
// fires nothing. A timer fires at the end of the tick that covers its
// deadline plus the alarm's scheduling delay: never early, at most one tick
// after its deadline (plus that delay). Ticks stay counted from the wheel's
// origin, so when a timer is due does not depend on when the alarm was set.
package timerwheel

import (
	"math"
	"math/bits"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
)

// Wheel is a hashed timing wheel. Create it with New.
type Wheel struct {
	clk    clock.Clock
	tick   time.Duration
	origin time.Time // tick k covers (origin+(k-1)·tick, origin+k·tick]
	mask   int64

	mu       sync.Mutex // guards the fields below and every pending Timer's links
	slots    []Timer    // list heads (sentinels) of each slot
	occupied []uint64   // bit s set while slot s holds a timer
	next     int64      // the first tick Advance has not processed yet
	pending  int
	stop     chan struct{}
	done     chan struct{}
	// live is set from Start to Stop: only then is there an alarm.
	live bool
	// alarm wakes the goroutine (through wake) at the end of tick armed,
	// noTick when it is not set. armed is at or before every pending
	// timer's tick, except while the goroutine is between a wake-up and
	// setting the alarm again: it is lowered by Schedule, raised only by
	// the goroutine, and left alone by Timer.Stop (a wake-up that finds
	// nothing due is harmless).
	alarm *clock.Timer
	armed int64
	// wake is 1-buffered and never closed: a send that finds it full is
	// dropped, as a wake-up is already pending.
	wake chan struct{}
	// wakeups counts the goroutine's wake-ups, for tests and benchmarks.
	wakeups atomic.Int64
}

// noTick is the tick of no timer: later than any.
const noTick = math.MaxInt64

// maxSleep bounds the alarm's delay: a timer centuries away costs a
// harmless wake-up every maxSleep rather than a duration that overflows.
const maxSleep = time.Hour

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
	w := &Wheel{clk: clk, tick: tick, origin: clk.Now(), mask: int64(n - 1), slots: make([]Timer, n),
		occupied: make([]uint64, (n+63)/64), armed: noTick, wake: make(chan struct{}, 1)}
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
	s := t.due & w.mask
	head := &w.slots[s]
	if head.next == head {
		w.occupied[s>>6] |= 1 << (s & 63)
	}
	t.prev, t.next = head.prev, head
	head.prev.next = t
	head.prev = t
	t.pending = true
	w.pending++
	if t.due < w.armed && w.live && !w.armLocked(t.due) {
		w.poke() // due already: the goroutine advances at once
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
	if t.prev == t.next { // both are the head: t is its slot's only timer
		s := t.due & w.mask
		w.occupied[s>>6] &^= 1 << (s & 63)
	}
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

// Start starts the goroutine that advances the wheel whenever a timer is
// due on the injected clock. Call Stop to end it.
func (w *Wheel) Start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop != nil {
		return
	}
	w.stop, w.done = make(chan struct{}), make(chan struct{})
	w.live = true
	if k := w.nextDueLocked(); k != noTick && !w.armLocked(k) {
		w.poke()
	}
	go w.run(w.stop, w.done)
}

// run sleeps until the alarm (or a Schedule of a timer already due) wakes
// it, then advances the wheel to the clock's time and sets the alarm for
// the next occupied tick.
func (w *Wheel) run(stop, done chan struct{}) {
	defer close(done)
	for {
		select {
		case <-stop:
			return
		case <-w.wake:
		}
		w.wakeups.Add(1)
		for {
			w.Advance(w.clk.Now())
			if w.rearm() {
				break
			}
			// The next occupied tick ended while the last ones fired.
			select {
			case <-stop:
				return
			default:
			}
		}
	}
}

// rearm sets the alarm for the earliest occupied tick, or clears it if the
// wheel is empty. It reports false if that tick has ended already, and the
// wheel must advance again.
func (w *Wheel) rearm() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.live {
		return true
	}
	k := w.nextDueLocked()
	if k == noTick {
		if w.alarm != nil {
			w.alarm.Stop()
		}
		w.armed = noTick
		return true
	}
	return w.armLocked(k)
}

// armLocked records k as armed and sets the alarm for the end of tick k,
// the time at which Advance fires it. It reports false if that time has
// come already: then the caller must see that the wheel advances.
//
// A clock timer counts its delay from the clock's time when it is set, not
// from the time read to compute the delay. If the clock moved much in
// between — a fake clock advanced by another goroutine meanwhile — the
// alarm would go off late by that much, so it is set again from a fresh
// reading.
func (w *Wheel) armLocked(k int64) bool {
	w.armed = k
	var end time.Duration // the end of tick k, from the origin
	if k > int64(math.MaxInt64/w.tick) {
		end = math.MaxInt64
	} else {
		end = time.Duration(k) * w.tick
	}
	slack := max(w.tick/64, 1)
	now := w.clk.Now().Sub(w.origin)
	for range 4 {
		d := end - max(now, 0)
		if d <= 0 {
			return false
		}
		d = min(d, maxSleep)
		if w.alarm == nil {
			w.alarm = w.clk.AfterFunc(d, w.poke)
		} else {
			w.alarm.Reset(d)
		}
		then := now
		now = w.clk.Now().Sub(w.origin)
		if now-then < slack {
			break
		}
	}
	return now < end
}

// poke wakes the goroutine, or leaves a wake-up pending.
func (w *Wheel) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// nextDueLocked returns the earliest tick a pending timer is due on, or
// noTick if none is pending. A slot i ticks after next holds only timers
// due at next+i or a multiple of the wheel's length later, so the scan of
// the occupied slots from next ends at the first slot whose tick is not
// before the best found, a round at most.
func (w *Wheel) nextDueLocked() int64 {
	if w.pending == 0 {
		return noTick
	}
	n := int64(len(w.slots))
	best := int64(noTick)
	for i := int64(0); i < n; {
		s := (w.next + i) & w.mask
		word := w.occupied[s>>6] >> (s & 63)
		if word == 0 { // skip to the next word, or to slot 0
			i += min(64-(s&63), n-s)
			continue
		}
		i += int64(bits.TrailingZeros64(word))
		k := w.next + i
		if i >= n || k >= best {
			break
		}
		head := &w.slots[k&w.mask]
		for t := head.next; t != head; t = t.next {
			if t.due < best {
				if best = t.due; best == k {
					return k
				}
			}
		}
		i++
	}
	return best
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
	if w.live {
		w.live = false
		close(stop)
	}
	if w.alarm != nil {
		w.alarm.Stop()
	}
	w.armed = noTick
	w.mu.Unlock()
	<-done
}
