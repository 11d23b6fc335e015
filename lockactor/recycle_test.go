package lockactor

import (
	"slices"
	"testing"

	"github.com/holdfast/holdfast/scripts"
)

// cycle takes and releases request id of field on d's machine, and returns
// the arguments of the release call it sent.
func cycle(t *testing.T, d *driver, id ReqID, field string) []string {
	t.Helper()
	acq := one(t, d.enqueue(id, field, -1), EffAcquire)
	one(t, d.step(granted(acq.Op, 1, uint64(id))), EffAcquired)
	rel := one(t, d.step(Msg{Kind: MsgRelease, ID: id}), EffRelease)
	one(t, d.step(Msg{Kind: MsgReply, Op: rel.Op, Reply: []int64{0}}), EffLost)
	return rel.Call.Args
}

// TestCyclesReuseTheOwnerAndRequest: a fresh grant and its final release
// leave their owner and request for the next cycle's (no allocation of
// either), and the reused owner never writes its release arguments' array
// again: the arguments of a call already answered stay as they were sent,
// since a call that timed out may still run later with them (the
// simulator's late calls, a retried write).
func TestCyclesReuseTheOwnerAndRequest(t *testing.T) {
	d := newDriver(t)
	first := cycle(t, d, 1, "c:a")
	sent := slices.Clone(first)
	o, r := d.m.spare, d.m.spareReq
	if o == nil || r == nil {
		t.Fatalf("after a cycle: spare owner %p, spare request %p; want both kept", o, r)
	}
	second := cycle(t, d, 2, "c:b")
	if d.m.spare != o || d.m.spareReq != r {
		t.Fatal("the second cycle did not reuse the first one's owner and request")
	}
	if !slices.Equal(first, sent) {
		t.Fatalf("the first release's arguments changed to %q after the owner was reused, want %q", first, sent)
	}
	if second[0] != "c:b" || &second[0] == &first[0] {
		t.Fatalf("the second release's arguments %q share the first's array", second)
	}
	// A cycle on the machine alone, as the actor runtime steps it (one
	// effect buffer, reused) allocates the release's arguments (a reused
	// owner keeps none, above) and no owner or request.
	buf := make([]Effect, 0, 16)
	op := func(effs []Effect, script *scripts.Script) uint64 {
		for _, e := range effs {
			if e.Kind == EffCall && e.Call.Script == script {
				return e.Op
			}
		}
		t.Fatalf("no %s call in %v", script.Name, kinds(effs))
		return 0
	}
	id := ReqID(10)
	grant, released := []int64{scripts.AcquireGranted, 1, 0}, []int64{0}
	allocs := testing.AllocsPerRun(200, func() {
		id++
		grant[2] = int64(id)
		req := Request{ID: id, Field: "c:x", Lease: lease, Watchdog: true, Wait: -1}
		buf = d.m.StepInto(buf[:0], d.now, Msg{Kind: MsgEnqueue, Req: req})
		buf = d.m.StepInto(buf[:0], d.now, Msg{Kind: MsgReply, Op: op(buf, scripts.AcquireScript), Reply: grant})
		buf = d.m.StepInto(buf[:0], d.now, Msg{Kind: MsgRelease, ID: id})
		buf = d.m.StepInto(buf[:0], d.now, Msg{Kind: MsgReply, Op: op(buf, scripts.ReleaseScript), Reply: released})
	})
	if allocs > 1 {
		t.Errorf("a cycle of the machine allocated %.1f times, want at most 1 (the release's arguments)", allocs)
	}
}

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
