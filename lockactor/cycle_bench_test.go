package lockactor

import (
	"testing"

	"github.com/holdfast/holdfast/scripts"
)

// cycler steps one uncontended cycle of a machine (enqueue, grant, release,
// released) as the actor runtime steps it: one effect buffer, reused.
type cycler struct {
	tb              testing.TB
	d               *driver
	buf             []Effect
	id              ReqID
	grant, released []int64
}

func newCycler(tb testing.TB, d *driver) *cycler {
	return &cycler{tb: tb, d: d, buf: make([]Effect, 0, 16), id: 10,
		grant: []int64{scripts.AcquireGranted, 1, 0}, released: []int64{0}}
}

// op returns the op of the script's call among the last step's effects.
func (c *cycler) op(script *scripts.Script) uint64 {
	for _, e := range c.buf {
		if e.Kind == EffCall && e.Call.Script == script {
			return e.Op
		}
	}
	c.tb.Fatalf("no %s call in %v", script.Name, kinds(c.buf))
	return 0
}

func (c *cycler) cycle() {
	c.id++
	c.grant[2] = int64(c.id)
	d := c.d
	req := Request{ID: c.id, Field: "c:x", Lease: lease, Watchdog: true, Wait: -1}
	c.buf = d.m.StepInto(c.buf[:0], d.now, Msg{Kind: MsgEnqueue, Req: req})
	c.buf = d.m.StepInto(c.buf[:0], d.now, Msg{Kind: MsgReply, Op: c.op(scripts.AcquireScript), Reply: c.grant})
	c.buf = d.m.StepInto(c.buf[:0], d.now, Msg{Kind: MsgRelease, ID: c.id})
	c.buf = d.m.StepInto(c.buf[:0], d.now, Msg{Kind: MsgReply, Op: c.op(scripts.ReleaseScript), Reply: c.released})
}

// BenchmarkMachineCycle: one uncontended cycle of the machine alone.
func BenchmarkMachineCycle(b *testing.B) {
	c := newCycler(b, newDriver(b))
	b.ReportAllocs()
	for b.Loop() {
		c.cycle()
	}
}
