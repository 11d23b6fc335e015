package lockactor

import (
	"errors"
	"testing"
)

// cycle takes and releases request id of field on d's machine.
func cycle(t *testing.T, d *driver, id ReqID, field string) {
	t.Helper()
	acq := one(t, d.enqueue(id, field, -1), EffAcquire)
	one(t, d.step(granted(acq.Op, 1, uint64(id))), EffAcquired)
	rel := one(t, d.step(Msg{Kind: MsgRelease, ID: id}), EffRelease)
	one(t, d.step(Msg{Kind: MsgReply, Op: rel.Op, Reply: []int64{0}}), EffLost)
}

// TestCyclesReuseTheOwnerAndRequest: a fresh grant and its final release
// leave their owner and request for the next cycle's.
func TestCyclesReuseTheOwnerAndRequest(t *testing.T) {
	d := newDriver(t)
	cycle(t, d, 1, "c:a")
	o, r := d.m.spare, d.m.spareReq
	if o == nil || r == nil {
		t.Fatalf("after a cycle: spare owner %p, spare request %p; want both kept", o, r)
	}
	cycle(t, d, 2, "c:b")
	if d.m.spare != o || d.m.spareReq != r {
		t.Fatal("the second cycle did not reuse the first one's owner and request")
	}
}

// TestFaultedCallsStopTheReuse: a call answered by a fault may still run
// later (a timeout's call that reaches Redis after it; the simulator's late
// calls) with the arguments it was given, which live in its request or
// owner: from then on the machine reuses neither, so those arguments never
// change under it.
func TestFaultedCallsStopTheReuse(t *testing.T) {
	d := newDriver(t)
	cycle(t, d, 1, "c:a")
	acq := one(t, d.enqueue(2, "c:b", -1), EffAcquire)
	one(t, d.step(granted(acq.Op, 1, 2)), EffAcquired)
	rel := one(t, d.step(Msg{Kind: MsgRelease, ID: 2}), EffRelease)
	sent := append([]string(nil), rel.Call.Args...)
	effs := d.step(Msg{Kind: MsgReply, Op: rel.Op, Fault: Ambiguous, Err: errTimeout})
	retry := one(t, effs, EffSchedule)
	d.now = retry.At
	again := one(t, d.step(Msg{Kind: MsgTimer, Timer: retry.Timer}), EffRelease)
	one(t, d.step(Msg{Kind: MsgReply, Op: again.Op, Reply: []int64{0}}), EffLost)
	if d.m.spare != nil || d.m.spareReq != nil {
		t.Fatal("spares kept after a call was answered by a fault")
	}
	cycle(t, d, 3, "c:c")
	cycle(t, d, 4, "c:d")
	if d.m.spare != nil || d.m.spareReq != nil {
		t.Fatal("a machine whose call faulted kept spares")
	}
	for i, a := range sent {
		if rel.Call.Args[i] != a {
			t.Fatalf("the faulted call's arguments changed to %q, want %q", rel.Call.Args, sent)
		}
	}
}

var errTimeout = errors.New("timeout")

// TestLostOwnerWithCallInFlightIsNotReused: an owner lost while a call on
// its field is in flight (its deadline passed during its release) is not
// reused: the call's arguments may live in it.
func TestLostOwnerWithCallInFlightIsNotReused(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:a", -1), EffAcquire)
	one(t, d.step(granted(acq.Op, 1, 7)), EffAcquired)
	rel := one(t, d.step(Msg{Kind: MsgRelease, ID: 1}), EffRelease)
	var gen uint64
	for _, o := range d.m.owners {
		gen = o.gen
	}
	d.now = d.now.Add(2 * lease)
	d.step(Msg{Kind: MsgTimer, Timer: TimerKey{TimerDeadline, gen}})
	if len(d.m.owners) != 0 {
		t.Fatalf("owners %d after the deadline, want the hold lost", len(d.m.owners))
	}
	if d.m.spare != nil {
		t.Fatal("an owner lost with its release in flight was kept for reuse")
	}
	d.step(Msg{Kind: MsgReply, Op: rel.Op, Reply: []int64{-1}})
}
