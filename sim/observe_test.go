package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/sim"
)

// TestObserverFollowsElection: a simulated observer on another client is
// told the state first, a grant and a resignation within a few network
// delays, an expiry (which Redis does not announce) at the lease's end,
// and reads nothing while nothing changes.
func TestObserverFollowsElection(t *testing.T) {
	w := sim.New(sim.Config{Seed: 7})
	ctx := context.Background()
	leader := w.NewClient(sim.ClientConfig{ID: "a"})
	watcher := w.NewClient(sim.ClientConfig{ID: "b"})
	o := w.Observe(watcher, "jobs")
	w.Advance(20 * time.Millisecond)
	if st, ok := o.Latest(); !ok || st != (holdfast.Leader{}) {
		t.Fatalf("first state %+v (told %v), want nobody", st, ok)
	}
	reads := o.Reads()
	w.Advance(time.Minute)
	if o.Reads() != reads {
		t.Fatalf("%d reads of a quiet election in a minute", o.Reads()-reads)
	}

	l := leader.Elect(ctx, "jobs", "10.0.0.1")
	w.Advance(20 * time.Millisecond)
	if st, _ := o.Latest(); st != (holdfast.Leader{Value: "10.0.0.1", Term: l.Token()}) || l.Token() == 0 {
		t.Fatalf("after the grant the observer shows %+v, want term %d", st, l.Token())
	}
	l.Release(ctx)
	w.Advance(20 * time.Millisecond)
	if st, _ := o.Latest(); st.Term != 0 {
		t.Fatalf("after the resignation the observer shows %+v", st)
	}

	// A leader that stops: its lease (3 s) runs out unannounced.
	l = leader.Elect(ctx, "jobs", "10.0.0.2")
	w.Advance(20 * time.Millisecond)
	w.Pause(leader)
	w.Advance(2900 * time.Millisecond)
	if st, _ := o.Latest(); st.Term != l.Token() {
		t.Fatalf("before the lease's end the observer shows %+v", st)
	}
	w.Advance(200 * time.Millisecond)
	if st, _ := o.Latest(); st.Term != 0 {
		t.Fatalf("after the lease's end the observer shows %+v (told %v)", st, o.States())
	}
	want := []holdfast.Leader{{}, {Value: "10.0.0.1", Term: l.Token() - 1}, {}, {Value: "10.0.0.2", Term: l.Token()}, {}}
	if got := o.States(); len(got) != len(want) {
		t.Fatalf("told %v, want %v", got, want)
	}
	for i, st := range o.States() {
		if st != want[i] {
			t.Fatalf("told %v, want %v", o.States(), want)
		}
	}
	w.Resume(leader)
	w.Advance(time.Millisecond)
	if leader.Close() != nil || watcher.Close() != nil {
		t.Fatal("Close")
	}
}
