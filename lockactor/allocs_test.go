//go:build !race

// The race detector's instrumentation allocates on its own account, so
// allocation counts are tested without it: scripts/test.sh runs this file's
// tests in a run of their own.

package lockactor

import (
	"testing"

	"github.com/holdfast/holdfast/scripts"
)

// TestMachineCycleAllocatesNothing: once a cycle has left its owner and
// request to reuse, a cycle of the machine stepped as the actor runtime
// steps it (one effect buffer, reused) allocates nothing.
func TestMachineCycleAllocatesNothing(t *testing.T) {
	d := newDriver(t)
	cycle(t, d, 1, "c:a")
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
	if allocs != 0 {
		t.Errorf("a cycle of the machine allocated %.1f times, want none", allocs)
	}
}
