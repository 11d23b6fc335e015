package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/sim"
)

// TestElectRunsInSim: the simulator runs the election's scripts: one of
// three candidates leads, a resignation hands over with a higher term, a
// paused leader's lease ends and a candidate succeeds it, and the other
// kinds refuse the name. (The election's properties are checked elsewhere;
// this only shows the kind runs on simulated nodes.)
func TestElectRunsInSim(t *testing.T) {
	w := sim.New(sim.Config{Seed: 42})
	ctx := context.Background()
	var cs []*holdfast.Client
	var ls []*holdfast.Lock
	for _, id := range []string{"a", "b", "c"} {
		c := w.NewClient(sim.ClientConfig{ID: id, WatchdogTimeout: 3 * time.Second})
		cs = append(cs, c)
		ls = append(ls, c.Elect(ctx, "leader", id))
	}
	w.Advance(100 * time.Millisecond)
	leading := func() []int {
		var out []int
		for i, l := range ls {
			select {
			case <-l.Lost:
				continue
			default:
			}
			select {
			case <-l.Acquired:
				out = append(out, i)
			default:
			}
		}
		return out
	}
	first := leading()
	if len(first) != 1 {
		t.Fatalf("leaders %v, want one", first)
	}
	term := ls[first[0]].Token()
	if l := cs[first[0]].Lock(ctx, "leader", holdfast.WithWait(0)); l.Wait(ctx) == nil {
		t.Fatal("Lock granted on an election's name")
	}
	if err := ls[first[0]].Release(ctx); err != nil {
		t.Fatal(err)
	}
	w.Advance(100 * time.Millisecond)
	second := leading()
	if len(second) != 1 || second[0] == first[0] || ls[second[0]].Token() <= term {
		t.Fatalf("after the resignation leaders %v (term %d after %d)", second, ls[second[0]].Token(), term)
	}
	term = ls[second[0]].Token()
	w.Pause(cs[second[0]])
	w.Advance(4 * time.Second)
	// The paused leader has not run its deadline yet: it is not counted.
	var third []int
	for _, i := range leading() {
		if i != second[0] {
			third = append(third, i)
		}
	}
	if len(third) != 1 || ls[third[0]].Token() <= term {
		t.Fatalf("after the leader's pause leaders %v besides the paused one", third)
	}
	w.Resume(cs[second[0]])
	w.Advance(time.Millisecond)
	select {
	case <-ls[second[0]].Lost:
	default:
		t.Fatal("the paused leader was not told its leadership ended")
	}
	for _, c := range cs {
		c.Close()
	}
}
