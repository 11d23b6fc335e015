package holdfast_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
)

// recvUntil receives states from ch until one satisfies ok, and returns
// every state received; it fails t if none does within d.
func recvUntil(t *testing.T, ch <-chan holdfast.Leader, d time.Duration, what string, ok func(holdfast.Leader) bool) []holdfast.Leader {
	t.Helper()
	deadline := time.After(d)
	var got []holdfast.Leader
	for {
		select {
		case st, open := <-ch:
			if !open {
				t.Fatalf("%s: the channel closed after %+v", what, got)
			}
			got = append(got, st)
			if ok(st) {
				return got
			}
		case <-deadline:
			t.Fatalf("%s: not within %v (told %+v)", what, d, got)
		}
	}
}

// TestObserveAcrossAnEmptyRestart: an observer that was told a leader of
// term 3 is told, once Redis is killed, that it cannot read it (with the
// leader it last read), and once Redis is back empty and another
// candidate leads with term 1, that leader: the observer follows Redis
// across the loss of its data, though the term went back.
func TestObserveAcrossAnEmptyRestart(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	const name = "elect-restart"
	// a's watchdog renews every second: it learns its hold is gone soon.
	a := newClient(t, srv, holdfast.Config{WatchdogTimeout: 3 * time.Second})
	b, obs := newClient(t, srv, holdfast.Config{}), newClient(t, srv, holdfast.Config{})
	for range 2 {
		l := a.Elect(ctx, name, "a")
		mustAcquire(t, l)
		l.Release(ctx)
	}
	la := a.Elect(ctx, name, "a")
	mustAcquire(t, la)
	if la.Token() != 3 {
		t.Fatalf("term %d, want 3", la.Token())
	}
	ch := obs.Observe(t.Context(), name)
	if st := recv(t, ch, waitFor); st != (holdfast.Leader{Value: "a", Term: 3}) {
		t.Fatalf("first state %+v, want a of term 3", st)
	}

	srv.Kill()
	killed := time.Now()
	st := recv(t, ch, waitFor)
	t.Logf("cannot read told %v after the kill: %v", time.Since(killed).Round(time.Millisecond), st.Err)
	if st.Err == nil || st.Value != "a" || st.Term != 3 {
		t.Fatalf("after the kill told %+v, want a of term 3 with Err", st)
	}
	select {
	case st := <-ch:
		t.Fatalf("told %+v again while Redis is away", st)
	case <-time.After(2 * time.Second): // reads fail meanwhile
	}

	srv.Restart() // empty: terms start again at 1
	back := recv(t, ch, waitFor)
	if back.Err != nil {
		t.Fatalf("after the restart told %+v, want a state read", back)
	}
	lb := b.Elect(ctx, name, "b")
	mustAcquire(t, lb)
	if lb.Token() != 1 {
		t.Fatalf("term %d after the empty restart, want 1", lb.Token())
	}
	states := recvUntil(t, ch, waitFor, "the new leader of term 1", func(st holdfast.Leader) bool {
		return st == holdfast.Leader{Value: "b", Term: 1}
	})
	for _, st := range append([]holdfast.Leader{back}, states...) {
		if st.Err != nil || st.Term != 0 && st != (holdfast.Leader{Value: "b", Term: 1}) {
			t.Fatalf("after the restart told %+v, want nobody or b of term 1", states)
		}
	}
	mustLose(t, la, holdfast.ErrNotOwner) // its renewal finds its hold gone
}

// TestObserveSaysWhenRedisCannotBeRead: with nobody leading (no lease
// whose end would make it read), an observer tells that it cannot read
// Redis once the server is killed, as a vacancy with Err, and the vacancy
// without Err once Redis answers again; the channel stays open
// throughout.
func TestObserveSaysWhenRedisCannotBeRead(t *testing.T) {
	srv := redistest.Start(t)
	const name = "elect-down"
	obs := newClient(t, srv, holdfast.Config{CallTimeout: 500 * time.Millisecond})
	ch := obs.Observe(t.Context(), name)
	if st := recv(t, ch, waitFor); st != (holdfast.Leader{}) {
		t.Fatalf("first state %+v, want nobody", st)
	}
	srv.Kill()
	st := recv(t, ch, waitFor)
	if st.Err == nil || st.Term != 0 {
		t.Fatalf("after the kill told %+v, want the vacancy with Err", st)
	}
	if errors.Is(st.Err, holdfast.ErrClosed) {
		t.Fatalf("a failed read told as the end of the observation: %v", st.Err)
	}
	srv.Restart()
	if st := recv(t, ch, waitFor); st != (holdfast.Leader{}) {
		t.Fatalf("once Redis answers again told %+v, want the vacancy without Err", st)
	}
}

// TestObserveSaysWhenRedisIsFrozen: with nobody leading, an observer of a
// server that stops answering without closing its connections (SIGSTOP)
// tells that it cannot read once the Redis client gives the connection up
// (rueidis's ping of a quiet connection goes unanswered), and the vacancy
// once the server runs again.
func TestObserveSaysWhenRedisIsFrozen(t *testing.T) {
	srv := redistest.Start(t)
	obs := newClient(t, srv, holdfast.Config{CallTimeout: time.Second})
	ch := obs.Observe(t.Context(), "elect-frozen")
	if st := recv(t, ch, waitFor); st != (holdfast.Leader{}) {
		t.Fatalf("first state %+v, want nobody", st)
	}
	srv.Freeze()
	frozen := time.Now()
	st := recv(t, ch, time.Minute)
	t.Logf("told %v after the freeze: %v", time.Since(frozen).Round(time.Millisecond), st.Err)
	if st.Err == nil || st.Term != 0 {
		t.Fatalf("after the freeze told %+v, want the vacancy with Err", st)
	}
	srv.Thaw()
	if st := recv(t, ch, waitFor); st != (holdfast.Leader{}) {
		t.Fatalf("once Redis answers again told %+v, want the vacancy without Err", st)
	}
}
