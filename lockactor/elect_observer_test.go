package lockactor

import (
	"errors"
	"testing"
	"time"
)

// TestObserver: the first read is told; after it every read that differs
// from the state told is, whatever its term (a term told again to another
// leader after a roll-back, term 1 after an empty restart), and nothing
// else; a led name is read again at its lease's end; a failure is told
// once, as the last state read with Err, and the next success is told even
// when unchanged; failed reads back off from 50 ms to 1 s and a success
// resets it.
func TestObserver(t *testing.T) {
	var o Observer
	if _, ok := o.Told(); ok {
		t.Fatal("the zero Observer has told a state")
	}
	lead := func(v string, term uint64) LeaderState { return LeaderState{Value: v, Term: term} }
	down := errors.New("connection refused")
	type step struct {
		st   LeaderState
		fail bool // a failed read (with down) instead of st
		ttl  time.Duration
		tell bool
		next time.Duration
		arm  bool
		told LeaderState // Told's state after the step
	}
	steps := []step{
		{st: LeaderState{}, tell: true}, // the first state, a vacancy
		{st: LeaderState{}},             // the same vacancy
		{st: lead("a", 3), ttl: time.Second, tell: true, next: time.Second, arm: true, told: lead("a", 3)},
		{st: lead("a", 3), ttl: 500 * time.Millisecond, next: 500 * time.Millisecond, arm: true, told: lead("a", 3)}, // renewed: no news, look again
		{st: lead("b", 3), ttl: time.Second, tell: true, next: time.Second, arm: true, told: lead("b", 3)},           // roll-back: term 3 again, another leader
		{st: lead("c", 1), ttl: time.Second, tell: true, next: time.Second, arm: true, told: lead("c", 1)},           // empty restart: term 1
		{st: LeaderState{}, tell: true},                        // a vacancy after a leader
		{fail: true, tell: true, told: LeaderState{Err: down}}, // cannot read: told once
		{fail: true, told: LeaderState{Err: down}},
		{st: LeaderState{}, tell: true},                                                                    // answers again, unchanged: told
		{st: lead("d", 4), ttl: -1, tell: true, told: lead("d", 4)},                                        // no expiry: no timer
		{fail: true, tell: true, told: LeaderState{Value: "d", Term: 4, Err: down}},                        // the last state read, with Err
		{st: lead("e", 5), ttl: time.Second, tell: true, next: time.Second, arm: true, told: lead("e", 5)}, // answers again, changed
	}
	for i, s := range steps {
		var tell, arm bool
		var next time.Duration
		if s.fail {
			tell, _ = o.Failed(down)
		} else {
			tell, next, arm = o.Read(s.st, s.ttl)
		}
		told, ok := o.Told()
		if !ok || tell != s.tell || next != s.next || arm != s.arm || told != s.told {
			t.Fatalf("step %d: got %v, %v, %v (told %+v), want %v, %v, %v (%+v)",
				i, tell, next, arm, told, s.tell, s.next, s.arm, s.told)
		}
	}
	for i, want := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
		400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second} {
		if _, got := o.Failed(down); got != want {
			t.Fatalf("failure %d: backoff %v, want %v", i+1, got, want)
		}
	}
	o.Read(lead("e", 5), time.Second)
	if _, got := o.Failed(down); got != ObserveMinBackoff {
		t.Fatalf("after a success the backoff is %v, want %v", got, ObserveMinBackoff)
	}
}

// TestObserverFailsFirst: an observer whose first read fails tells the
// failure with no state, and then the first state it reads.
func TestObserverFailsFirst(t *testing.T) {
	var o Observer
	down := errors.New("down")
	if tell, _ := o.Failed(down); !tell {
		t.Fatal("the first failure was not told")
	}
	if st, ok := o.Told(); !ok || st != (LeaderState{Err: down}) {
		t.Fatalf("told %+v, %v", st, ok)
	}
	if tell, _, _ := o.Read(LeaderState{}, 0); !tell {
		t.Fatal("the first success (a vacancy) was not told")
	}
	if st, _ := o.Told(); st != (LeaderState{}) {
		t.Fatalf("told %+v, want the vacancy", st)
	}
}
