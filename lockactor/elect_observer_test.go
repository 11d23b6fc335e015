package lockactor

import (
	"testing"
	"time"
)

// TestObserver: the first read is told; after it only news is (a higher
// term, or a vacancy after a leader), so terms told never go back, even
// when a read crosses a roll-back; a led name is read again at its lease's
// end; failed reads back off from 50 ms to 1 s and a success resets it.
func TestObserver(t *testing.T) {
	var o Observer
	if _, ok := o.Told(); ok {
		t.Fatal("the zero Observer has told a state")
	}
	lead := func(v string, term uint64) LeaderState { return LeaderState{Value: v, Term: term} }
	steps := []struct {
		st       LeaderState
		ttl      time.Duration
		tell     bool
		next     time.Duration
		arm      bool
		toldTerm uint64
	}{
		{LeaderState{}, 0, true, 0, false, 0},  // the first state, a vacancy
		{LeaderState{}, 0, false, 0, false, 0}, // the same vacancy
		{lead("a", 3), time.Second, true, time.Second, true, 3},
		{lead("a", 3), 500 * time.Millisecond, false, 500 * time.Millisecond, true, 3}, // renewed: no news, look again
		{lead("b", 2), time.Second, false, time.Second, true, 3},                       // rolled back: never told
		{LeaderState{}, 0, true, 0, false, 0},                                          // a vacancy after a leader
		{lead("b", 2), time.Second, false, time.Second, true, 0},                       // older than told, after the vacancy too
		{lead("c", 4), -1, true, 0, false, 4},                                          // no expiry: no timer
	}
	for i, s := range steps {
		tell, next, arm := o.Read(s.st, s.ttl)
		told, _ := o.Told()
		if tell != s.tell || next != s.next || arm != s.arm || told.Term != s.toldTerm {
			t.Fatalf("step %d: Read(%+v, %v) = %v, %v, %v (told term %d), want %v, %v, %v (%d)",
				i, s.st, s.ttl, tell, next, arm, told.Term, s.tell, s.next, s.arm, s.toldTerm)
		}
	}
	for i, want := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
		400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second} {
		if got := o.Failed(); got != want {
			t.Fatalf("failure %d: backoff %v, want %v", i+1, got, want)
		}
	}
	o.Read(lead("c", 4), time.Second)
	if got := o.Failed(); got != ObserveMinBackoff {
		t.Fatalf("after a success the backoff is %v, want %v", got, ObserveMinBackoff)
	}
}
