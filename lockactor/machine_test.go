package lockactor

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/holdfast/holdfast/scripts"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const lease = 30 * time.Second

// driver feeds a machine and keeps what it emitted.
type driver struct {
	t   testing.TB
	m   *Machine
	now time.Time
}

func newDriver(t testing.TB) *driver {
	return &driver{t: t, m: New("n", Config{Slack: 10 * time.Millisecond}), now: t0}
}

func (d *driver) step(msg Msg) []Effect {
	effs := append([]Effect(nil), d.m.Step(d.now, msg)...)
	checkSparesUnreachable(d.t, d.m)
	return effs
}

func (d *driver) enqueue(id ReqID, field string, wait time.Duration) []Effect {
	return d.step(Msg{Kind: MsgEnqueue, Req: Request{ID: id, Field: field, Lease: lease, Watchdog: true, Wait: wait}})
}

// Script calls, told apart by their script, for one, none and indexOf.
const (
	EffAcquire EffectKind = 100 + iota
	EffRelease
	EffHandoff
)

// kindOf names an effect for the tests: a call by its script.
func effKind(e Effect) EffectKind {
	if e.Kind != EffCall {
		return e.Kind
	}
	switch e.Call.Script {
	case scripts.AcquireScript:
		return EffAcquire
	case scripts.ReleaseScript:
		return EffRelease
	case scripts.HandoffScript:
		return EffHandoff
	}
	return e.Kind
}

// eff is an effect with its script call's arguments decoded.
type eff struct {
	Effect
	Field, To string
	Expected  int64
	Lease     time.Duration
}

func decoded(e Effect) eff {
	out := eff{Effect: e, Field: e.Field, Lease: e.Lease}
	if e.Kind != EffCall {
		return out
	}
	a := e.Call.Args
	ms := func(s string) time.Duration {
		n, _ := strconv.ParseInt(s, 10, 64)
		return time.Duration(n) * time.Millisecond
	}
	num := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	switch effKind(e) {
	case EffAcquire:
		out.Field, out.Lease, out.Expected = a[0], ms(a[1]), num(a[2])
	case EffRelease:
		out.Field, out.Expected = a[0], num(a[1])
	case EffHandoff:
		out.Field, out.To, out.Lease = a[0], a[1], ms(a[2])
	}
	return out
}

func one(t *testing.T, effs []Effect, kind EffectKind) eff {
	t.Helper()
	var found []Effect
	for _, e := range effs {
		if effKind(e) == kind {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one %v effect, got %d in %v", kind, len(found), kinds(effs))
	}
	return decoded(found[0])
}

func none(t *testing.T, effs []Effect, kind EffectKind) {
	t.Helper()
	for _, e := range effs {
		if effKind(e) == kind {
			t.Fatalf("want no %v effect, got %v", kind, kinds(effs))
		}
	}
}

func indexOf(effs []Effect, kind EffectKind) int {
	for i, e := range effs {
		if effKind(e) == kind {
			return i
		}
	}
	return -1
}

func kinds(effs []Effect) []string {
	var out []string
	for _, e := range effs {
		if e.Kind == EffCall {
			out = append(out, e.Call.Script.Name)
			continue
		}
		out = append(out, e.Kind.String())
	}
	return out
}

func granted(op uint64, count int64, token uint64) Msg {
	return Msg{Kind: MsgReply, Op: op, Reply: []int64{scripts.AcquireGranted, count, int64(token)}}
}

func held(op uint64, pttl time.Duration) Msg {
	return Msg{Kind: MsgReply, Op: op, Reply: []int64{scripts.AcquireHeld, pttl.Milliseconds()}}
}

func TestUncontendedAcquireRenewRelease(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:a", -1), EffAcquire)
	if acq.Field != "c:a" || acq.Expected != 0 || acq.Lease != lease {
		t.Fatalf("acquire effect %+v", acq)
	}
	d.now = t0.Add(5 * time.Millisecond) // the reply comes later than the send
	effs := d.step(granted(acq.Op, 1, 7))
	a := one(t, effs, EffAcquired)
	if want := Validity(t0, lease); a.Token != 7 || !a.At.Equal(want) {
		t.Fatalf("acquired token %d deadline %v, want 7 and %v (measured from the send)", a.Token, a.At, want)
	}
	var renewAt, deadlineAt time.Time
	for _, e := range effs {
		if e.Kind == EffSchedule && e.Timer.Kind == TimerRenew {
			renewAt = e.At
		}
		if e.Kind == EffSchedule && e.Timer.Kind == TimerDeadline {
			deadlineAt = e.At
		}
	}
	if !renewAt.Equal(t0.Add(lease / 3)) {
		t.Fatalf("renewal at %v, want %v", renewAt, t0.Add(lease/3))
	}
	if !deadlineAt.Before(a.At) {
		t.Fatalf("deadline timer %v must fire before the deadline %v", deadlineAt, a.At)
	}

	// Renewal on the absolute grid.
	d.now = t0.Add(lease/3 + 3*time.Millisecond)
	gen := uint64(0)
	effs = d.step(Msg{Kind: MsgTimer, Timer: TimerKey{TimerRenew, 0}})
	none(t, effs, EffRenew) // unknown generation: ignored
	for _, o := range d.m.owners {
		gen = o.gen
	}
	effs = d.step(Msg{Kind: MsgTimer, Timer: TimerKey{TimerRenew, gen}})
	r := one(t, effs, EffRenew)
	next := one(t, effs, EffSchedule)
	if !next.At.Equal(t0.Add(2 * lease / 3)) {
		t.Fatalf("next renewal at %v, want %v (no drift from the late tick)", next.At, t0.Add(2*lease/3))
	}
	sent := d.now
	d.now = d.now.Add(time.Second)
	effs = d.step(Msg{Kind: MsgRenewReply, Op: r.Op, Sent: sent, Renewed: true})
	if dl := one(t, effs, EffDeadline); !dl.At.Equal(Validity(sent, lease)) {
		t.Fatalf("renewed deadline %v, want %v", dl.At, Validity(sent, lease))
	}

	effs = d.step(Msg{Kind: MsgRelease, ID: 1})
	rel := one(t, effs, EffRelease)
	if rel.Expected != 1 {
		t.Fatalf("release expected %d, want 1", rel.Expected)
	}
	effs = d.step(Msg{Kind: MsgReply, Op: rel.Op, Reply: []int64{0}})
	if one(t, effs, EffReleaseDone).Err != nil || indexOf(effs, EffReleaseDone) > indexOf(effs, EffLost) {
		t.Fatalf("release reply effects %v: want release-done(nil) before lost", kinds(effs))
	}
	if l := one(t, effs, EffLost); !errors.Is(l.Err, ErrReleased) {
		t.Fatalf("lost with %v", l.Err)
	}
	if !d.m.Idle() {
		t.Fatal("machine not idle after release")
	}
}

func TestWaiterSubscribesSleepsAtMostPTTLAndWakes(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:a", -1), EffAcquire)
	effs := d.step(held(acq.Op, 700*time.Millisecond))
	one(t, effs, EffSubscribe)
	// PTTL is cut to the millisecond: the key ends within the one after.
	if s := one(t, effs, EffSchedule); s.Timer.Kind != TimerRetry || !s.At.Equal(t0.Add(701*time.Millisecond)) {
		t.Fatalf("retry timer %+v, want at now+pttl+1ms", s)
	}
	// Confirmed subscription: one more try closes the gap before it.
	acq = one(t, d.step(Msg{Kind: MsgSubscribed}), EffAcquire)
	effs = d.step(held(acq.Op, 600*time.Millisecond))
	none(t, effs, EffAcquire)
	// A second waiter does not add a second attempt.
	none(t, d.enqueue(2, "c:b", -1), EffAcquire)
	// The release message wakes the head waiter.
	acq = one(t, d.step(Msg{Kind: MsgWake}), EffAcquire)
	if acq.Field != "c:a" {
		t.Fatalf("woke %q, want the head waiter c:a", acq.Field)
	}
	effs = d.step(granted(acq.Op, 1, 3))
	if one(t, effs, EffAcquired).ID != 1 {
		t.Fatal("head waiter not granted")
	}
	none(t, effs, EffUnsubscribe) // waiter 2 still waits
	// The release hands the lock to the local waiter in the same call.
	h := one(t, d.step(Msg{Kind: MsgRelease, ID: 1}), EffHandoff)
	if h.Field != "c:a" || h.To != "c:b" {
		t.Fatalf("handoff %q -> %q, want c:a -> c:b", h.Field, h.To)
	}
	effs = d.step(handedOff(h.Op, 0, 4))
	if one(t, effs, EffAcquired).ID != 2 {
		t.Fatal("waiter 2 not granted by the handoff")
	}
	one(t, effs, EffUnsubscribe)
}

func handedOff(op uint64, left int64, token uint64) Msg {
	return Msg{Kind: MsgReply, Op: op, Reply: []int64{left, scripts.AcquireGranted, 1, int64(token)}}
}

// holdWithWaiters grants request 1 (c:a) and queues requests 2..n behind it.
func holdWithWaiters(t *testing.T, d *driver, n int) {
	t.Helper()
	acq := one(t, d.enqueue(1, "c:a", -1), EffAcquire)
	one(t, d.step(granted(acq.Op, 1, 10)), EffAcquired)
	for i := 2; i <= n; i++ {
		none(t, d.enqueue(ReqID(i), "c:"+string(rune('a'+i-1)), -1), EffAcquire)
	}
}

func TestLocalHandoff(t *testing.T) {
	d := newDriver(t)
	holdWithWaiters(t, d, 2)
	d.now = t0.Add(time.Millisecond)
	effs := d.step(Msg{Kind: MsgRelease, ID: 1})
	h := one(t, effs, EffHandoff)
	none(t, effs, EffRelease)
	if h.Field != "c:a" || h.To != "c:b" || h.Lease != lease {
		t.Fatalf("handoff %+v", h)
	}
	sent := d.now
	d.now = d.now.Add(5 * time.Millisecond)
	effs = d.step(handedOff(h.Op, 0, 11))
	done, lost, acquired := indexOf(effs, EffReleaseDone), indexOf(effs, EffLost), indexOf(effs, EffAcquired)
	if done < 0 || lost < done || acquired < lost {
		t.Fatalf("handoff reply effects %v: want release-done, lost (of 1), then acquired (of 2)", kinds(effs))
	}
	if effs[done].Err != nil || !errors.Is(effs[lost].Err, ErrReleased) || effs[lost].ID != 1 {
		t.Fatalf("releaser ended with %v / %v", effs[done].Err, effs[lost].Err)
	}
	if a := effs[acquired]; a.ID != 2 || a.Token != 11 || !a.At.Equal(Validity(sent, lease)) {
		t.Fatalf("acquired %+v, want request 2, token 11, deadline from the handoff's send", a)
	}
	none(t, effs, EffSubscribe)
	// The new holder's own release goes to Redis: nobody waits.
	one(t, d.step(Msg{Kind: MsgRelease, ID: 2}), EffRelease)
}

func TestHandoffStreakEndsAndYields(t *testing.T) {
	d := &driver{t: t, m: New("n", Config{Slack: 10 * time.Millisecond, HandoffLimit: 2}), now: t0}
	holdWithWaiters(t, d, 4)
	for id := ReqID(1); id <= 2; id++ {
		h := one(t, d.step(Msg{Kind: MsgRelease, ID: id}), EffHandoff)
		one(t, d.step(handedOff(h.Op, 0, uint64(10+id))), EffAcquired)
	}
	// Two handoffs in a row: the third release goes to Redis, and waiter 4
	// waits for its announcement instead of taking the lock straight back.
	rel := one(t, d.step(Msg{Kind: MsgRelease, ID: 3}), EffRelease)
	effs := d.step(Msg{Kind: MsgReply, Op: rel.Op, Reply: []int64{0}})
	none(t, effs, EffAcquire)
	one(t, effs, EffSubscribe)
	acq := one(t, d.step(Msg{Kind: MsgSubscribed}), EffAcquire)
	if acq.Field != "c:d" {
		t.Fatalf("attempt for %q, want c:d", acq.Field)
	}
	// A fresh grant starts a new streak.
	one(t, d.step(granted(acq.Op, 1, 20)), EffAcquired)
	d.enqueue(5, "c:e", -1)
	one(t, d.step(Msg{Kind: MsgRelease, ID: 4}), EffHandoff)
}

func TestHandoffWindowEnds(t *testing.T) {
	d := newDriver(t)
	holdWithWaiters(t, d, 2)
	d.now = t0.Add(10 * time.Millisecond) // the default window since the grant
	one(t, d.step(Msg{Kind: MsgRelease, ID: 1}), EffRelease)
}

func TestAmbiguousHandoffRepeatsTheRelease(t *testing.T) {
	d := newDriver(t)
	holdWithWaiters(t, d, 2)
	h := one(t, d.step(Msg{Kind: MsgRelease, ID: 1}), EffHandoff)
	effs := d.step(Msg{Kind: MsgReply, Op: h.Op, Fault: Ambiguous, Err: errors.New("timeout")})
	none(t, effs, EffLost)
	var retry Effect
	for _, e := range effs {
		if e.Kind == EffSchedule && e.Timer.Kind == TimerOpRetry {
			retry = e
		}
	}
	if retry.Kind == 0 {
		t.Fatalf("no release retry scheduled in %v", kinds(effs))
	}
	d.now = retry.At
	rel := one(t, d.step(Msg{Kind: MsgTimer, Timer: retry.Timer}), EffRelease)
	if rel.Field != "c:a" || rel.Expected != 1 {
		t.Fatalf("repeat %+v, want the final release of c:a", rel)
	}
	// The handoff had run: the release finds nothing, which settles it.
	effs = d.step(Msg{Kind: MsgReply, Op: rel.Op, Reply: []int64{scripts.ReleaseNotOwner}})
	if l := one(t, effs, EffLost); l.ID != 1 || !errors.Is(l.Err, ErrReleased) {
		t.Fatalf("releaser lost %+v", l)
	}
	// The waiter learns its grant by an ordinary attempt after its backoff.
	d.now = d.now.Add(time.Second)
	acq := one(t, d.step(Msg{Kind: MsgTimer, Timer: TimerKey{TimerRetry, 0}}), EffAcquire)
	if acq.Field != "c:b" || acq.Expected != 0 {
		t.Fatalf("attempt %+v", acq)
	}
	if a := one(t, d.step(granted(acq.Op, 1, 11)), EffAcquired); a.ID != 2 {
		t.Fatalf("acquired %+v", a)
	}
}

func TestHandoffAfterTheHoldWasLost(t *testing.T) {
	d := newDriver(t)
	holdWithWaiters(t, d, 2)
	h := one(t, d.step(Msg{Kind: MsgRelease, ID: 1}), EffHandoff)
	effs := d.step(Msg{Kind: MsgReply, Op: h.Op, Reply: []int64{scripts.ReleaseNotOwner, scripts.AcquireHeld, 1000}})
	if rd := one(t, effs, EffReleaseDone); !errors.Is(rd.Err, ErrNotOwner) {
		t.Fatalf("release answered %v, want ErrNotOwner", rd.Err)
	}
	none(t, effs, EffAcquired)
	one(t, effs, EffSubscribe)
}

func TestWaiterCancelledDuringHandoffUndoesItsGrant(t *testing.T) {
	d := newDriver(t)
	holdWithWaiters(t, d, 2)
	h := one(t, d.step(Msg{Kind: MsgRelease, ID: 1}), EffHandoff)
	none(t, d.step(Msg{Kind: MsgCancel, ID: 2, Err: errors.New("ctx done")}), EffLost)
	effs := d.step(handedOff(h.Op, 0, 11))
	none(t, effs, EffAcquired)
	if rel := one(t, effs, EffRelease); rel.Field != "c:b" {
		t.Fatalf("undo releases %q, want c:b", rel.Field)
	}
	if n := len(d.m.reqs); n != 0 {
		t.Fatalf("%d requests left", n)
	}
}

func TestWakeDuringAttemptRetriesAtOnce(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:a", -1), EffAcquire)
	d.step(held(acq.Op, time.Second))
	acq = one(t, d.step(Msg{Kind: MsgSubscribed}), EffAcquire)
	none(t, d.step(Msg{Kind: MsgWake}), EffAcquire) // attempt in flight
	// The attempt lost the race with the release announced meanwhile.
	one(t, d.step(held(acq.Op, time.Second)), EffAcquire)
}

func TestTryOnceAndWaitBudget(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:a", 0), EffAcquire)
	effs := d.step(held(acq.Op, time.Second))
	if l := one(t, effs, EffLost); !errors.Is(l.Err, ErrWaitTimeout) {
		t.Fatalf("try-once ended with %v", l.Err)
	}
	if !d.m.Idle() {
		t.Fatal("not idle after try-once failed")
	}

	effs = d.enqueue(2, "c:b", 2*time.Second)
	if s := one(t, effs, EffSchedule); s.Timer.Kind != TimerWait || !s.At.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("wait timer %+v", s)
	}
	acq = one(t, effs, EffAcquire)
	d.step(held(acq.Op, 10*time.Second))
	d.now = t0.Add(2 * time.Second)
	effs = d.step(Msg{Kind: MsgTimer, Timer: TimerKey{TimerWait, 2}})
	if l := one(t, effs, EffLost); !errors.Is(l.Err, ErrWaitTimeout) {
		t.Fatalf("wait budget ended with %v", l.Err)
	}
	one(t, effs, EffUnsubscribe)
}

func TestCancelWhileAttemptInFlightUndoesTheGrant(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:a", -1), EffAcquire)
	cause := errors.New("ctx done")
	none(t, d.step(Msg{Kind: MsgCancel, ID: 1, Err: cause}), EffLost)
	effs := d.step(granted(acq.Op, 1, 9))
	none(t, effs, EffAcquired)
	rel := one(t, effs, EffRelease)
	if rel.Expected != 1 || rel.Field != "c:a" {
		t.Fatalf("undo release %+v", rel)
	}
	if l := one(t, effs, EffLost); l.Err != cause {
		t.Fatalf("lost with %v, want the cancel cause", l.Err)
	}
	if d.m.Idle() {
		t.Fatal("idle while the undo is in flight")
	}
	d.step(Msg{Kind: MsgReply, Op: rel.Op, Reply: []int64{0}})
	if !d.m.Idle() {
		t.Fatal("not idle after the undo")
	}
}

func TestAmbiguousAttemptRepeatsThenUndoesOnGiveUp(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:a", time.Second), EffAcquire)
	effs := d.step(Msg{Kind: MsgReply, Op: acq.Op, Fault: Ambiguous, Err: errors.New("timeout")})
	retry := one(t, effs, EffSchedule)
	if retry.Timer.Kind != TimerRetry {
		t.Fatalf("want a retry timer, got %+v", retry)
	}
	d.now = retry.At
	acq2 := one(t, d.step(Msg{Kind: MsgTimer, Timer: retry.Timer}), EffAcquire)
	if acq2.Expected != 0 || acq2.Field != acq.Field {
		t.Fatalf("repeat %+v must carry the same arguments", acq2)
	}
	d.step(Msg{Kind: MsgReply, Op: acq2.Op, Fault: Ambiguous, Err: errors.New("timeout")})
	d.now = t0.Add(time.Second)
	effs = d.step(Msg{Kind: MsgTimer, Timer: TimerKey{TimerWait, 1}})
	rel := one(t, effs, EffRelease)
	if rel.Expected != 1 {
		t.Fatalf("undo expected %d", rel.Expected)
	}
	if l := one(t, effs, EffLost); !errors.Is(l.Err, ErrWaitTimeout) {
		t.Fatalf("lost %v", l.Err)
	}
	// The release effect comes before Lost: it is sent before failure is reported.
	if effKind(effs[len(effs)-1]) == EffRelease {
		t.Fatal("release sent after the failure was reported")
	}
}

func TestReentrySharesTokenAndBalances(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:w", -1), EffAcquire)
	d.step(granted(acq.Op, 1, 5))
	acq = one(t, d.enqueue(2, "c:w", -1), EffAcquire)
	if acq.Expected != 1 {
		t.Fatalf("reentry expected %d, want 1", acq.Expected)
	}
	if a := one(t, d.step(granted(acq.Op, 2, 5)), EffAcquired); a.Token != 5 || a.ID != 2 {
		t.Fatalf("reentry acquired %+v", a)
	}
	rel := one(t, d.step(Msg{Kind: MsgRelease, ID: 2}), EffRelease)
	if rel.Expected != 2 {
		t.Fatalf("inner release expected %d", rel.Expected)
	}
	effs := d.step(Msg{Kind: MsgReply, Op: rel.Op, Reply: []int64{1}})
	if l := one(t, effs, EffLost); l.ID != 2 {
		t.Fatalf("lost %+v", l)
	}
	none(t, effs, EffCancelTimer) // the outer hold keeps its timers
	rel = one(t, d.step(Msg{Kind: MsgRelease, ID: 1}), EffRelease)
	d.step(Msg{Kind: MsgReply, Op: rel.Op, Reply: []int64{0}})
	if !d.m.Idle() {
		t.Fatal("not idle")
	}
}

func TestRenewalFindsOwnerGone(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:a", -1), EffAcquire)
	d.step(granted(acq.Op, 1, 1))
	var gen uint64
	for _, o := range d.m.owners {
		gen = o.gen
	}
	d.now = t0.Add(lease / 3)
	r := one(t, d.step(Msg{Kind: MsgTimer, Timer: TimerKey{TimerRenew, gen}}), EffRenew)
	effs := d.step(Msg{Kind: MsgRenewReply, Op: r.Op, Sent: d.now, Renewed: false})
	if l := one(t, effs, EffLost); !errors.Is(l.Err, ErrNotOwner) {
		t.Fatalf("lost %v", l.Err)
	}
	if !d.m.Idle() {
		t.Fatal("not idle")
	}
}

func TestDeadlinePassesWithoutRenewal(t *testing.T) {
	d := newDriver(t)
	d.step(Msg{Kind: MsgEnqueue, Req: Request{ID: 1, Field: "c:a", Lease: time.Second, Wait: -1}})
	effs := d.step(granted(1, 1, 1))
	var dl Effect
	for _, e := range effs {
		if e.Kind == EffSchedule && e.Timer.Kind == TimerDeadline {
			dl = e
		}
		if e.Kind == EffSchedule && e.Timer.Kind == TimerRenew {
			t.Fatal("a fixed lease must not be renewed")
		}
	}
	if want := t0.Add(time.Second - Drift(time.Second) - 10*time.Millisecond); !dl.At.Equal(want) {
		t.Fatalf("deadline timer at %v, want %v", dl.At, want)
	}
	d.now = dl.At
	if l := one(t, d.step(Msg{Kind: MsgTimer, Timer: dl.Timer}), EffLost); !errors.Is(l.Err, ErrLeaseExpired) {
		t.Fatalf("lost %v", l.Err)
	}
	// Release after the hold is over.
	if rd := one(t, d.step(Msg{Kind: MsgRelease, ID: 1}), EffReleaseDone); !errors.Is(rd.Err, ErrNotHeld) {
		t.Fatalf("release after loss: %v", rd.Err)
	}
}

func TestShutdownReleasesHoldsAndEndsWaiters(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:a", -1), EffAcquire)
	d.step(granted(acq.Op, 1, 1))
	d.enqueue(2, "c:b", -1)
	effs := d.step(Msg{Kind: MsgShutdown, Err: ErrClosed})
	rel := one(t, effs, EffRelease)
	if rel.Expected != 0 || rel.Field != "c:a" {
		t.Fatalf("shutdown release %+v", rel)
	}
	if l := one(t, effs, EffLost); l.ID != 2 || l.Err != ErrClosed {
		t.Fatalf("waiter lost %+v", l)
	}
	// No retry while closing.
	effs = d.step(Msg{Kind: MsgReply, Op: rel.Op, Fault: Ambiguous, Err: errors.New("down")})
	if l := one(t, effs, EffLost); l.ID != 1 || l.Err != ErrClosed {
		t.Fatalf("holder lost %+v", l)
	}
	if !d.m.Idle() {
		t.Fatal("not idle after shutdown")
	}
	if l := one(t, d.enqueue(3, "c:c", -1), EffLost); l.Err != ErrClosed {
		t.Fatal("enqueue after shutdown must end at once")
	}
}

func TestWrongTypeEndsRequest(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:a", -1), EffAcquire)
	wrong := errors.New("WRONGTYPE Operation against a key holding the wrong kind of value")
	effs := d.step(Msg{Kind: MsgReply, Op: acq.Op, Fault: Permanent, Err: wrong})
	if l := one(t, effs, EffLost); !errors.Is(l.Err, wrong) {
		t.Fatalf("lost %v", l.Err)
	}
	none(t, effs, EffRelease)
	if !d.m.Idle() {
		t.Fatal("not idle")
	}
}

func TestFirstRenewalsShareTheGrid(t *testing.T) {
	const lease = 3 * time.Second
	base := firstRenewal(t0, lease)
	if base.After(t0.Add(lease/3)) || base.Before(t0.Add(lease/3-lease/30)) {
		t.Fatalf("first renewal %v, want within lease/30 before %v", base, t0.Add(lease/3))
	}
	// Holds granted within one grid step renew at the same instant.
	for _, d := range []time.Duration{time.Millisecond, 37 * time.Millisecond, 99 * time.Millisecond} {
		sent := base.Add(-lease/3 + d)
		if got := firstRenewal(sent, lease); !got.Equal(base) || got.Before(sent) {
			t.Fatalf("sent %v: first renewal %v, want %v", sent, got, base)
		}
	}
}

// testKind is a kind made in a test, as a new kind is made in its own file:
// the reentrant lock's calls, with reentries in mode 2 refused by "Redis"
// (the test answers them) and shared holds among mode-1 requests.
var testKind = &Kind{
	Name:    "test",
	Acquire: Reentrant.Acquire,
	DecodeAcquire: func(vals []int64) (AcquireResult, error) {
		if len(vals) == 1 && vals[0] == -9 {
			return AcquireResult{Code: Refused, Err: errTestRefused}, nil
		}
		return DecodeAcquire(vals)
	},
	Release:       Reentrant.Release,
	DecodeRelease: Reentrant.DecodeRelease,
	Renew:         scripts.RenewScript,
	Channel:       Reentrant.Channel,
	MayAttempt: func(head *Request, holds func(func(Hold) bool)) bool {
		for h := range holds {
			if h.Mode != 1 || head.Mode != 1 {
				return false
			}
		}
		return true
	},
}

var errTestRefused = errors.New("refused by the kind")

// TestKindPolicy: a kind's MayAttempt lets mode-1 requests of different
// owners try while mode-1 holds exist, and a Refused reentry ends only the
// request, not the owner's hold.
func TestKindPolicy(t *testing.T) {
	d := newDriver(t)
	enq := func(id ReqID, field string, mode uint8) []Effect {
		return d.step(Msg{Kind: MsgEnqueue, Req: Request{ID: id, Field: field, Lease: lease, Watchdog: true, Wait: -1, Kind: testKind, Mode: mode}})
	}
	acq := one(t, enq(1, "c:a", 1), EffAcquire)
	d.step(granted(acq.Op, 1, 1))
	// A second mode-1 owner may try beside the first hold.
	acq = one(t, enq(2, "c:b", 1), EffAcquire)
	one(t, d.step(granted(acq.Op, 1, 2)), EffAcquired)
	// A mode-2 owner may not.
	none(t, enq(3, "c:c", 2), EffAcquire)
	// A request of another kind is refused at once while the machine is busy.
	effs := d.enqueue(4, "c:d", -1)
	if lost := one(t, effs, EffLost); !errors.Is(lost.Err, ErrWrongKind) {
		t.Fatalf("other kind ended with %v", lost.Err)
	}
	// A reentry of c:a refused by Redis ends that request only.
	re := one(t, enq(5, "c:a", 2), EffAcquire)
	effs = d.step(Msg{Kind: MsgReply, Op: re.Op, Reply: []int64{-9}})
	if lost := one(t, effs, EffLost); lost.ID != 5 || !errors.Is(lost.Err, errTestRefused) {
		t.Fatalf("refused reentry: %+v", lost)
	}
	// c:a still holds: its release expects count 1.
	rel := one(t, d.step(Msg{Kind: MsgRelease, ID: 1}), EffRelease)
	if rel.Field != "c:a" || rel.Expected != 1 {
		t.Fatalf("release %q expected %d", rel.Field, rel.Expected)
	}
}

// TestKindRefusalEndsOnlyItsKind: a request of another kind that arrives
// while the machine's first attempt is in flight waits for Redis's answer.
// When Redis refuses the machine's kind (the name is in use as the other
// one), that refusal ends only the refused kind's request, and the parked
// request goes on as the machine's new kind; when Redis confirms the
// machine's kind instead, the parked request is refused.
func TestKindRefusalEndsOnlyItsKind(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:a", -1), EffAcquire)
	other := Request{ID: 2, Field: "c:b", Lease: lease, Watchdog: true, Wait: -1, Kind: testKind, Mode: 1}
	none(t, d.step(Msg{Kind: MsgEnqueue, Req: other}), EffLost)
	// Redis: the name is in use as another kind.
	effs := d.step(Msg{Kind: MsgReply, Op: acq.Op, Reply: []int64{-2}})
	if lost := one(t, effs, EffLost); lost.ID != 1 || !errors.Is(lost.Err, ErrWrongKind) {
		t.Fatalf("refused request: %+v", lost)
	}
	next := one(t, effs, EffAcquire)
	if next.Field != "c:b" {
		t.Fatalf("the parked request did not try: %+v", next)
	}
	one(t, d.step(granted(next.Op, 1, 7)), EffAcquired)

	// The other way: the machine's kind is confirmed (told to wait).
	d = newDriver(t)
	acq = one(t, d.enqueue(1, "c:a", -1), EffAcquire)
	none(t, d.step(Msg{Kind: MsgEnqueue, Req: other}), EffLost)
	effs = d.step(Msg{Kind: MsgReply, Op: acq.Op, Reply: []int64{0, 500}})
	if lost := one(t, effs, EffLost); lost.ID != 2 || !errors.Is(lost.Err, ErrWrongKind) {
		t.Fatalf("parked request after the kind was confirmed: %+v", lost)
	}
}

// TestZeroPTTLRetriesAtOnce: a refusal whose holder key has under a
// millisecond left (PTTL 0) retries within the millisecond; only a key
// without a TTL (-1) waits NoTTLRetry.
func TestZeroPTTLRetriesAtOnce(t *testing.T) {
	for _, tc := range []struct {
		pttl int64
		want time.Duration
	}{{0, time.Millisecond}, {-1, time.Second}, {250, 251 * time.Millisecond}} {
		d := newDriver(t)
		acq := one(t, d.enqueue(1, "c:a", -1), EffAcquire)
		effs := d.step(Msg{Kind: MsgReply, Op: acq.Op, Reply: []int64{0, tc.pttl}})
		sch := one(t, effs, EffSchedule)
		if got := sch.At.Sub(d.now); sch.Timer.Kind != TimerRetry || got != tc.want {
			t.Fatalf("PTTL %d: retry %v after (%v), want %v", tc.pttl, got, sch.Timer.Kind, tc.want)
		}
	}
}

// TestFairFieldWaitsForItsUndo: a fair request gives up while the undo of
// its place cannot reach Redis; a new request of the same owner field takes
// no place (and does not try) until that undo has landed — a repeat of the
// undo running after the new place would remove it, and the waiter would
// lose its turn.
func TestFairFieldWaitsForItsUndo(t *testing.T) {
	d := newDriver(t)
	d.m.cfg.WaiterTimeout = 3 * time.Second
	fair := func(id ReqID) Msg {
		return Msg{Kind: MsgEnqueue, Req: Request{ID: id, Field: "c:i:x", Lease: lease, Watchdog: true, Wait: -1, Kind: Fair}}
	}
	fieldCalls := func(effs []Effect, script *scripts.Script) []Effect {
		var out []Effect
		for _, e := range effs {
			if e.Kind == EffCall && e.Call.Script == script && e.Call.Args[0] == "c:i:x" {
				out = append(out, e)
			}
		}
		return out
	}
	effs := d.step(fair(1))
	acq := fieldCalls(effs, scripts.FairAcquireScript)
	if len(acq) != 1 {
		t.Fatalf("want the head's attempt, got %v", kinds(effs))
	}
	d.step(held(acq[0].Op, time.Second)) // placed in Redis's queue
	effs = d.step(Msg{Kind: MsgCancel, ID: 1, Err: errors.New("gave up")})
	undo := fieldCalls(effs, scripts.FairReleaseScript)
	if len(undo) != 1 {
		t.Fatalf("want the undo of the place, got %v", kinds(effs))
	}
	effs = d.step(Msg{Kind: MsgReply, Op: undo[0].Op, Fault: Ambiguous, Err: errors.New("timeout")})
	effs = append(effs, d.step(fair(2))...)
	if c := fieldCalls(effs, scripts.FairAcquireScript); len(c) != 0 {
		t.Fatalf("a place or attempt of field x went out while its undo is to be repeated: %v", kinds(effs))
	}
	var retry Effect
	for _, e := range effs {
		if e.Kind == EffSchedule && e.Timer.Kind == TimerOpRetry {
			retry = e
		}
	}
	if retry.Kind == 0 {
		t.Fatalf("no retry of the undo scheduled: %v", kinds(effs))
	}
	d.now = retry.At
	effs = d.step(Msg{Kind: MsgTimer, Timer: retry.Timer})
	undo = fieldCalls(effs, scripts.FairReleaseScript)
	if len(undo) != 1 || len(fieldCalls(effs, scripts.FairAcquireScript)) != 0 {
		t.Fatalf("want the undo repeated alone, got %v", kinds(effs))
	}
	effs = d.step(Msg{Kind: MsgReply, Op: undo[0].Op, Reply: []int64{0}})
	if len(fieldCalls(effs, scripts.FairAcquireScript)) != 1 {
		t.Fatalf("once the undo landed, request 2 asks Redis: got %v", kinds(effs))
	}
}

// A try-once reentry cancelled while its call is in flight ends when that
// call is answered, also when the answer is a grant: it is decided by its
// one call. The count it added is given back in the background, and the
// owner's other hold lives on (the simulator's one-try bound found it kept
// pending while that give-back timed out).
func TestTryOnceReentryGivenUpInFlightEndsWithItsCall(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:y", -1), EffAcquire)
	one(t, d.step(granted(acq.Op, 1, 7)), EffAcquired)
	re := one(t, d.enqueue(2, "c:y", 0), EffAcquire)
	if re.Expected != 1 {
		t.Fatalf("reentry expected %d, want 1", re.Expected)
	}
	cancelled := errors.New("context ended")
	none(t, d.step(Msg{Kind: MsgCancel, ID: 2, Err: cancelled}), EffLost) // it waits for its call
	effs := d.step(granted(re.Op, 2, 7))
	if l := one(t, effs, EffLost); l.ID != 2 || !errors.Is(l.Err, cancelled) {
		t.Fatalf("lost %d with %v, want request 2 ended by its cancellation", l.ID, l.Err)
	}
	none(t, effs, EffAcquired)
	back := one(t, effs, EffRelease)
	if back.Expected != 2 {
		t.Fatalf("give-back release expected %d, want 2", back.Expected)
	}
	effs = d.step(Msg{Kind: MsgReply, Op: back.Op, Reply: []int64{1}})
	none(t, effs, EffLost)
	rel := one(t, d.step(Msg{Kind: MsgRelease, ID: 1}), EffRelease)
	if rel.Expected != 1 {
		t.Fatalf("the outer release expected %d, want 1", rel.Expected)
	}
	if l := one(t, d.step(Msg{Kind: MsgReply, Op: rel.Op, Reply: []int64{0}}), EffLost); l.ID != 1 || !errors.Is(l.Err, ErrReleased) {
		t.Fatalf("lost %d with %v, want request 1 released", l.ID, l.Err)
	}
}

// TestFairUndoOutlastsTheLeaseWhileThePlaceLives: a fair waiter whose lease
// is shorter than WaiterTimeout gives up while Redis cannot be reached. Its
// place in Redis's queue lives WaiterTimeout from its last place call, so
// the undo is repeated that long, not only for the lease: an undo that
// stopped early left the place, with its old turn, to the next request of
// the field, and a grant made to it went to that client ahead of the other
// clients' waiters (TestFairLockProperties, seed 10767946117536888175).
func TestFairUndoOutlastsTheLeaseWhileThePlaceLives(t *testing.T) {
	d := newDriver(t)
	const short = 300 * time.Millisecond
	d.m.cfg.WaiterTimeout = 3 * time.Second
	fair := func(id ReqID) Msg {
		return Msg{Kind: MsgEnqueue, Req: Request{ID: id, Field: "c:i:x", Lease: short, Watchdog: true, Wait: -1, Kind: Fair}}
	}
	undoOf := func(effs []Effect) *Effect {
		for i, e := range effs {
			if e.Kind == EffCall && e.Call.Script == scripts.FairReleaseScript && e.Call.Args[0] == "c:i:x" {
				return &effs[i]
			}
		}
		return nil
	}
	var acq Effect
	for _, e := range d.step(fair(1)) {
		if e.Kind == EffCall && e.Call.Script == scripts.FairAcquireScript {
			acq = e
		}
	}
	if acq.Kind == 0 {
		t.Fatal("no attempt of the head")
	}
	d.step(held(acq.Op, time.Second)) // placed in Redis's queue at t0
	undo := undoOf(d.step(Msg{Kind: MsgCancel, ID: 1, Err: errors.New("gave up")}))
	if undo == nil {
		t.Fatal("no undo of the place")
	}
	sent := 0
	for undo != nil {
		sent++
		d.now = d.now.Add(200 * time.Millisecond) // the call times out
		var retry *Effect
		effs := d.step(Msg{Kind: MsgReply, Op: undo.Op, Fault: Ambiguous, Err: errors.New("timeout")})
		for i, e := range effs {
			if e.Kind == EffSchedule && e.Timer.Kind == TimerOpRetry {
				retry = &effs[i]
			}
		}
		if retry == nil {
			break
		}
		d.now = retry.At
		undo = undoOf(d.step(Msg{Kind: MsgTimer, Timer: retry.Timer}))
	}
	if last := d.now.Sub(t0); last < d.m.cfg.WaiterTimeout-time.Second {
		t.Fatalf("the undo stopped %v after the place was taken (%d calls), while the place lives %v", last, sent, d.m.cfg.WaiterTimeout)
	}
	if last := d.now.Sub(t0); last > d.m.cfg.WaiterTimeout+time.Second {
		t.Fatalf("the undo went on %v after the place was taken (%d calls), past its WaiterTimeout %v", last, sent, d.m.cfg.WaiterTimeout)
	}
}
