package lockactor

import (
	"testing"

	"github.com/holdfast/holdfast/scripts"
)

// BenchmarkMachineCycle: one uncontended cycle of the machine alone (enqueue,
// grant, release, released), stepped as the actor runtime steps it.
func BenchmarkMachineCycle(b *testing.B) {
	d := newDriver(b)
	buf := make([]Effect, 0, 16)
	op := func(effs []Effect, script *scripts.Script) uint64 {
		for _, e := range effs {
			if e.Kind == EffCall && e.Call.Script == script {
				return e.Op
			}
		}
		b.Fatalf("no %s call", script.Name)
		return 0
	}
	id := ReqID(10)
	grant, released := []int64{scripts.AcquireGranted, 1, 0}, []int64{0}
	b.ReportAllocs()
	for b.Loop() {
		id++
		grant[2] = int64(id)
		req := Request{ID: id, Field: "c:x", Lease: lease, Watchdog: true, Wait: -1}
		buf = d.m.StepInto(buf[:0], d.now, Msg{Kind: MsgEnqueue, Req: req})
		buf = d.m.StepInto(buf[:0], d.now, Msg{Kind: MsgReply, Op: op(buf, scripts.AcquireScript), Reply: grant})
		buf = d.m.StepInto(buf[:0], d.now, Msg{Kind: MsgRelease, ID: id})
		buf = d.m.StepInto(buf[:0], d.now, Msg{Kind: MsgReply, Op: op(buf, scripts.ReleaseScript), Reply: released})
	}
}
