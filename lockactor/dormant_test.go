package lockactor

import (
	"errors"
	"reflect"
	"testing"
	"time"
	"unsafe"
)

// epoch is the time the tests' records keep their deadlines from: an hour
// before t0, so that an offset is not the time itself.
var epoch = t0.Add(-time.Hour)

// holdOne returns a driver whose machine holds request 1 (watchdog lease)
// granted from a request sent at t0.
func holdOne(t *testing.T) *driver { return holdWaiting(t, -1) }

// holdWaiting is holdOne with the request's Wait.
func holdWaiting(t *testing.T, wait time.Duration) *driver {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:a", wait), EffAcquire)
	d.now = t0.Add(5 * time.Millisecond)
	d.step(granted(acq.Op, 1, 7))
	return d
}

func TestSleepOnlyWhenQuiet(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:a", -1), EffAcquire)
	if _, _, _, ok := d.m.Sleep(epoch); ok {
		t.Fatal("slept with its acquire in flight")
	}
	d.step(granted(acq.Op, 1, 7))
	d.enqueue(2, "c:b", -1)
	if _, _, _, ok := d.m.Sleep(epoch); ok {
		t.Fatal("slept with a waiter")
	}

	d = holdOne(t)
	d.step(Msg{Kind: MsgEnqueue, Req: Request{ID: 2, Field: "c:a", Lease: lease, Watchdog: true, Wait: -1}})
	if _, _, _, ok := d.m.Sleep(epoch); ok {
		t.Fatal("slept with a reentry in flight")
	}

	d = holdOne(t)
	gen := d.m.owners[0].gen
	d.now = t0.Add(lease / 3)
	one(t, d.step(Msg{Kind: MsgTimer, Timer: TimerKey{TimerRenew, gen}}), EffRenew)
	if _, _, _, ok := d.m.Sleep(epoch); ok {
		t.Fatal("slept with its renewal in flight")
	}

	d = holdOne(t)
	rec, id, field, ok := d.m.Sleep(epoch)
	if !ok {
		t.Fatal("a quiet held lock did not sleep")
	}
	if id != 1 || field != "c:a" || !rec.Deadline(epoch).Equal(Validity(t0, lease)) {
		t.Fatalf("record of request %d field %q deadline %v", id, field, rec.Deadline(epoch))
	}
}

func TestDormantRenewsOnTheGrid(t *testing.T) {
	d := holdOne(t)
	gen := d.m.owners[0].gen
	rec, id, field, _ := d.m.Sleep(epoch)
	if want := t0.Add(lease / 3); !rec.Due(epoch, 10*time.Millisecond).Equal(want) {
		t.Fatalf("due %v, want the first renewal %v", rec.Due(epoch, 10*time.Millisecond), want)
	}
	if r, w := rec.Fire(epoch, t0.Add(time.Second), "n", field, 10*time.Millisecond); r.Kind != 0 || w.Kind != 0 {
		t.Fatalf("early firing did %v / %v", r.Kind, w.Kind)
	}
	now := t0.Add(lease/3 + 3*time.Millisecond)
	r, w := rec.Fire(epoch, now, "n", field, 10*time.Millisecond)
	if r.Kind != EffRenew || w.Kind != 0 || r.Op != gen || r.Field != "c:a" || r.Lease != lease || r.Key != "holdfast:{n}" {
		t.Fatalf("renewal %+v, wake %v", r, w.Kind)
	}
	if want := rec.Deadline(epoch).Add(-10 * time.Millisecond); !rec.Due(epoch, 10*time.Millisecond).Equal(want) {
		t.Fatalf("due %v while renewing, want the deadline timer's %v", rec.Due(epoch, 10*time.Millisecond), want)
	}
	if r, _ := rec.Fire(epoch, now.Add(time.Millisecond), "n", field, 10*time.Millisecond); r.Kind != 0 {
		t.Fatal("a second renewal while one is in flight")
	}
	dl, wake := rec.RenewReply(epoch, id, Msg{Kind: MsgRenewReply, Op: gen, Sent: now, Renewed: true})
	if wake || dl.Kind != EffDeadline || dl.ID != 1 || !dl.At.Equal(Validity(now, lease)) {
		t.Fatalf("reply gave %+v wake %v, want the deadline %v", dl, wake, Validity(now, lease))
	}
	if want := t0.Add(2 * lease / 3); !rec.Due(epoch, 10*time.Millisecond).Equal(want) {
		t.Fatalf("next renewal %v, want %v (on the grid, no drift)", rec.Due(epoch, 10*time.Millisecond), want)
	}
	// A stale reply (another generation) changes nothing.
	if dl, wake := rec.RenewReply(epoch, id, Msg{Kind: MsgRenewReply, Op: gen + 1, Sent: now, Renewed: false}); dl.Kind != 0 || wake {
		t.Fatal("a stale reply was taken")
	}
}

func TestDormantFixedLeaseWakesAtItsDeadline(t *testing.T) {
	d := newDriver(t)
	d.step(Msg{Kind: MsgEnqueue, Req: Request{ID: 1, Field: "c:a", Lease: time.Second, Wait: -1}})
	d.step(granted(1, 1, 1))
	rec, id, field, ok := d.m.Sleep(epoch)
	if !ok {
		t.Fatal("did not sleep")
	}
	due := rec.Due(epoch, 10*time.Millisecond)
	if want := t0.Add(time.Second - Drift(time.Second) - 10*time.Millisecond); !due.Equal(want) {
		t.Fatalf("due %v, want the deadline timer's %v", due, want)
	}
	r, w := rec.Fire(epoch, due, "n", field, 10*time.Millisecond)
	if r.Kind != 0 || w.Kind != MsgTimer || w.Timer.Kind != TimerDeadline {
		t.Fatalf("firing at the deadline gave %+v / %+v", r, w)
	}
	m, _ := Wake("n", Config{Slack: 10 * time.Millisecond}, epoch, &rec, id, field, nil)
	if l := one(t, m.Step(due, w), EffLost); !errors.Is(l.Err, ErrLeaseExpired) {
		t.Fatalf("lost %v", l.Err)
	}
	if !m.Idle() {
		t.Fatal("not idle after the loss")
	}
}

// TestWakeIsTheMachineThatSlept steps two machines alike, one of which
// slept (and renewed while asleep) in between: from then on, every input
// gives both the same effects.
func TestWakeIsTheMachineThatSlept(t *testing.T) {
	cfg := Config{Slack: 10 * time.Millisecond}
	for _, tc := range []struct {
		name string
		// wait is the held request's Wait: its sign is all a record keeps.
		wait time.Duration
		// renewing leaves the record's renewal in flight when it wakes.
		renewing bool
		after    func(gen, relOp uint64, sent time.Time) []Msg
	}{
		{"release", -1, false, func(gen, relOp uint64, sent time.Time) []Msg {
			return []Msg{{Kind: MsgRelease, ID: 1}, {Kind: MsgReply, Op: relOp, Reply: []int64{0}}}
		}},
		{"reentry then two releases", -1, false, func(gen, op uint64, sent time.Time) []Msg {
			return []Msg{
				{Kind: MsgEnqueue, Req: Request{ID: 2, Field: "c:a", Lease: lease, Watchdog: true, Wait: -1}},
				granted(op, 2, 7),
				{Kind: MsgRelease, ID: 2}, {Kind: MsgReply, Op: op + 1, Reply: []int64{1}},
			}
		}},
		{"renewal refused", -1, true, func(gen, relOp uint64, sent time.Time) []Msg {
			return []Msg{{Kind: MsgRenewReply, Op: gen, Sent: sent, Renewed: false}}
		}},
		{"renewal failed then deadline", -1, true, func(gen, relOp uint64, sent time.Time) []Msg {
			return []Msg{
				{Kind: MsgRenewReply, Op: gen, Sent: sent, Err: errors.New("boom"), Fault: Transient},
				{Kind: MsgTimer, Timer: TimerKey{TimerDeadline, gen}},
			}
		}},
		{"renewal timer while renewing", -1, true, func(gen, relOp uint64, sent time.Time) []Msg {
			return []Msg{{Kind: MsgTimer, Timer: TimerKey{TimerRenew, gen}}, {Kind: MsgRenewReply, Op: gen, Sent: sent, Renewed: true}}
		}},
		{"release after a bounded wait", 5 * time.Second, false, func(gen, relOp uint64, sent time.Time) []Msg {
			return []Msg{{Kind: MsgRelease, ID: 1}, {Kind: MsgReply, Op: relOp, Reply: []int64{0}}}
		}},
		{"try-once hold, cancel", 0, false, func(gen, relOp uint64, sent time.Time) []Msg {
			return []Msg{{Kind: MsgCancel, ID: 1, Err: errors.New("ctx done")}}
		}},
		{"cancel", -1, false, func(gen, relOp uint64, sent time.Time) []Msg {
			return []Msg{{Kind: MsgCancel, ID: 1, Err: errors.New("ctx done")}}
		}},
		{"shutdown", -1, true, func(gen, relOp uint64, sent time.Time) []Msg {
			return []Msg{{Kind: MsgShutdown, Err: ErrClosed}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			awake, asleep := holdWaiting(t, tc.wait), holdWaiting(t, tc.wait)
			gen := awake.m.owners[0].gen
			rec, id, field, ok := asleep.m.Sleep(epoch)
			if !ok {
				t.Fatal("did not sleep")
			}
			// One renewal on each: the awake machine's through its timer,
			// the record's through Fire.
			now := t0.Add(lease/3 + time.Millisecond)
			awake.now = now
			awake.step(Msg{Kind: MsgTimer, Timer: TimerKey{TimerRenew, gen}})
			if r, _ := rec.Fire(epoch, now, "n", field, 10*time.Millisecond); r.Kind != EffRenew {
				t.Fatal("the record did not renew")
			}
			sent := now
			if !tc.renewing {
				now = now.Add(2 * time.Millisecond)
				reply := Msg{Kind: MsgRenewReply, Op: gen, Sent: sent, Renewed: true}
				awake.now = now
				awake.step(reply)
				if _, wake := rec.RenewReply(epoch, id, reply); wake {
					t.Fatal("a renewal that succeeded woke the record")
				}
			}
			m, effs := Wake("n", cfg, epoch, &rec, id, field, nil)
			for _, e := range effs {
				if e.Kind != EffSchedule {
					t.Fatalf("waking emitted %v", e.Kind)
				}
			}
			now = now.Add(time.Millisecond)
			next := awake.m.nextID + 1
			for i, msg := range tc.after(gen, next, sent) {
				switch {
				case msg.Kind == MsgTimer && msg.Timer.Kind == TimerRenew:
					now = t0.Add(2 * lease / 3)
				case msg.Kind == MsgTimer:
					now = awake.m.owners[0].deadline
				}
				want := append([]Effect(nil), awake.m.Step(now, msg)...)
				got := append([]Effect(nil), m.Step(now, msg)...)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("input %d (%v): woken machine did %v, the awake one %v", i, msg.Kind, kinds(got), kinds(want))
				}
				if len(want) == 0 {
					t.Fatalf("input %d (%v) did nothing: the case tests nothing", i, msg.Kind)
				}
			}
			if awake.m.Idle() != m.Idle() {
				t.Fatalf("idle: awake %v, woken %v", awake.m.Idle(), m.Idle())
			}
		})
	}
}

// TestUsesField: a field is in use while a request or owner has it or a
// call on it is unanswered, and not once its release is answered.
func TestUsesField(t *testing.T) {
	d := holdOne(t)
	if !d.m.UsesField("c:a") || d.m.UsesField("c:b") {
		t.Fatal("the holder's field is not in use, or a stranger's is")
	}
	rel := one(t, d.step(Msg{Kind: MsgRelease, ID: 1}), EffRelease)
	if !d.m.UsesField("c:a") {
		t.Fatal("the field left use with its release unanswered")
	}
	d.step(Msg{Kind: MsgReply, Op: rel.Op, Reply: []int64{0}})
	if d.m.UsesField("c:a") {
		t.Fatal("the field is still in use after its release was answered")
	}
}

// TestDormantSize: the record is 56 bytes (its deadline an 8-byte offset
// from the runtime's epoch, its request's ID and owner field the runtime's
// to give back, its lease and id counter four bytes each), so that the
// actor runtime's entry, which embeds it, stays within its 128-byte size
// class.
func TestDormantSize(t *testing.T) {
	if n := unsafe.Sizeof(Dormant{}); n > 56 {
		t.Fatalf("a Dormant is %d bytes, want at most 56", n)
	}
}

// TestDormantDeadlineFromEpoch: the record gives back its machine's
// deadline from whatever epoch it slept with, read the way the machine
// read it: with the real clock's monotonic reading, by that reading.
func TestDormantDeadlineFromEpoch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		base  time.Time // the machine's clock: when it sent its acquire
		epoch time.Time
	}{
		{"after the deadline", t0, t0.Add(365 * 24 * time.Hour)},
		{"monotonic", time.Now(), time.Now().Add(-time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t)
			d.now = tc.base
			acq := one(t, d.enqueue(1, "c:a", -1), EffAcquire)
			d.now = tc.base.Add(5 * time.Millisecond)
			d.step(granted(acq.Op, 1, 7))
			want := d.m.owners[0].deadline
			rec, id, field, ok := d.m.Sleep(tc.epoch)
			if !ok {
				t.Fatal("did not sleep")
			}
			got := rec.Deadline(tc.epoch)
			if !got.Equal(want) || hasMonotonic(got) != hasMonotonic(want) || !got.Equal(Validity(tc.base, lease)) {
				t.Fatalf("deadline %v (monotonic %v), want %v (monotonic %v)", got, hasMonotonic(got), want, hasMonotonic(want))
			}
			m, _ := Wake("n", Config{}, tc.epoch, &rec, id, field, nil)
			if dl := m.owners[0].deadline; !dl.Equal(want) || hasMonotonic(dl) != hasMonotonic(want) {
				t.Fatalf("woken deadline %v, want %v", dl, want)
			}
		})
	}
}

// TestDormantKeepsOnlyDeadlinesItCanGiveBack: a deadline read another way
// than the epoch (one with a monotonic reading, the other without) would
// come back from the offset compared by another clock: the machine does
// not sleep with it, and a record does not take such a renewal but wakes
// its machine with it.
func TestDormantKeepsOnlyDeadlinesItCanGiveBack(t *testing.T) {
	d := holdOne(t)
	if _, _, _, ok := d.m.Sleep(time.Now()); ok {
		t.Fatal("a deadline without a monotonic reading slept from an epoch with one")
	}
	gen := d.m.owners[0].gen
	rec, id, field, ok := d.m.Sleep(epoch)
	if !ok {
		t.Fatal("did not sleep")
	}
	now := t0.Add(lease/3 + time.Millisecond)
	if r, _ := rec.Fire(epoch, now, "n", field, 10*time.Millisecond); r.Kind != EffRenew {
		t.Fatal("the record did not renew")
	}
	before := rec
	sent := time.Now() // a monotonic reading, after t0
	dl, wake := rec.RenewReply(epoch, id, Msg{Kind: MsgRenewReply, Op: gen, Sent: sent, Renewed: true})
	if !wake || dl.Kind != 0 {
		t.Fatalf("a deadline the record cannot keep gave %+v, wake %v; want the machine woken", dl, wake)
	}
	if rec != before || !rec.Renewing() {
		t.Fatal("the record changed, or forgot its renewal in flight, for a reply it left to the machine")
	}
}

// TestDormantKeepsOnlyNumbersItCanGiveBack: the record keeps the lease in
// whole milliseconds and the id counter as its distance above the owner's
// generation, four bytes each. A machine whose lease is not whole
// milliseconds, or whose counter ran 2^32 ids past the generation, does
// not sleep; one that sleeps wakes with both as they were.
func TestDormantKeepsOnlyNumbersItCanGiveBack(t *testing.T) {
	held := func(lease time.Duration) *driver {
		d := newDriver(t)
		acq := one(t, d.step(Msg{Kind: MsgEnqueue, Req: Request{ID: 1, Field: "c:a", Lease: lease, Wait: -1}}), EffAcquire)
		d.now = t0.Add(5 * time.Millisecond)
		d.step(granted(acq.Op, 1, 7))
		return d
	}
	if _, _, _, ok := held(lease + 500*time.Microsecond).m.Sleep(epoch); ok {
		t.Error("a lease of 30.0005 s slept: the record keeps whole milliseconds")
	}
	if _, _, _, ok := held(50 * 24 * time.Hour).m.Sleep(epoch); ok {
		t.Error("a lease of 50 days slept: more milliseconds than four bytes hold")
	}
	d := held(lease)
	d.m.nextID = d.m.owners[0].gen + 1<<32
	if _, _, _, ok := d.m.Sleep(epoch); ok {
		t.Error("slept with its id counter 2^32 past the owner's generation")
	}

	d = held(2*time.Second + 3*time.Millisecond)
	d.m.nextID = d.m.owners[0].gen + 1<<32 - 1
	want, gen := d.m.nextID, d.m.owners[0].gen
	rec, id, field, ok := d.m.Sleep(epoch)
	if !ok {
		t.Fatal("a lease of whole milliseconds with its counter within reach did not sleep")
	}
	m, _ := Wake("n", Config{Slack: 10 * time.Millisecond}, epoch, &rec, id, field, nil)
	o := m.owners[0]
	if m.nextID != want || o.gen != gen || o.lease != 2*time.Second+3*time.Millisecond || m.reqs[0].Lease != o.lease {
		t.Fatalf("woke with counter %d, generation %d, lease %v (request's %v); slept with %d, %d, 2.003s",
			m.nextID, o.gen, o.lease, m.reqs[0].Lease, want, gen)
	}
	if m.reqs[0].ID != 1 || o.field != "c:a" {
		t.Fatalf("woke holding request %d of field %q, want 1 of c:a", m.reqs[0].ID, o.field)
	}
}
