package sim_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/sim"
)

func acquired(l *holdfast.Lock) bool {
	select {
	case <-l.Acquired:
		return true
	default:
		return false
	}
}

func lost(l *holdfast.Lock) bool {
	select {
	case <-l.Lost:
		return true
	default:
		return false
	}
}

func TestHandoffAndWatchdogInVirtualTime(t *testing.T) {
	w := sim.New(sim.Config{Seed: 1})
	a, b := w.NewClient(sim.ClientConfig{}), w.NewClient(sim.ClientConfig{})
	la := a.Lock(context.Background(), "job")
	w.Advance(10 * time.Millisecond)
	if !acquired(la) {
		t.Fatal("a not acquired")
	}
	lb := b.Lock(context.Background(), "job")
	w.Advance(time.Minute) // a holds through 20 renewals
	if lost(la) || acquired(lb) {
		t.Fatalf("after a minute: a lost=%v (%v), b acquired=%v", lost(la), la.Err(), acquired(lb))
	}
	la.Release(context.Background())
	w.Advance(20 * time.Millisecond) // the pub/sub message wakes b
	if !acquired(lb) || lb.Token() <= la.Token() {
		t.Fatalf("b acquired=%v token %d after %d", acquired(lb), lb.Token(), la.Token())
	}
	if !errors.Is(la.Err(), holdfast.ErrReleased) {
		t.Fatalf("a ended with %v", la.Err())
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if !lost(lb) || !errors.Is(lb.Err(), holdfast.ErrClosed) {
		t.Fatalf("b after Close: %v", lb.Err())
	}
	if keys := w.Keys(); len(keys) != 0 || w.Machines() != 0 {
		t.Fatalf("left behind: keys %v, %d machines", keys, w.Machines())
	}
}

func TestSameSeedSameRun(t *testing.T) {
	run := func() []sim.Event {
		w := sim.New(sim.Config{Seed: 42, Replicas: 1, MaxDelay: 5 * time.Millisecond})
		var clients []*holdfast.Client
		for i := 0; i < 3; i++ {
			clients = append(clients, w.NewClient(sim.ClientConfig{WatchdogTimeout: time.Second}))
		}
		for round := 0; round < 5; round++ {
			var locks []*holdfast.Lock
			for _, c := range clients {
				locks = append(locks, c.Lock(context.Background(), "x", holdfast.WithLease(700*time.Millisecond)))
				locks = append(locks, c.Lock(context.Background(), "y"), c.Lock(context.Background(), "z"))
			}
			w.Advance(3 * time.Second)
			if round == 2 {
				w.Failover()
			}
			for _, l := range locks {
				l.Release(context.Background())
			}
			w.Advance(100 * time.Millisecond)
		}
		for _, c := range clients {
			c.Lock(context.Background(), "y")
			c.Lock(context.Background(), "z")
		}
		w.Advance(time.Second)
		w.Failover() // resyncs every waiting machine
		w.Advance(time.Second)
		for _, c := range clients {
			c.Close() // shuts every machine down
		}
		return w.History()
	}
	h1, h2 := run(), run()
	if len(h1) == 0 || len(h1) != len(h2) {
		t.Fatalf("histories of %d and %d events", len(h1), len(h2))
	}
	for i := range h1 {
		if h1[i].At != h2[i].At || h1[i].Client != h2[i].Client || h1[i].Token != h2[i].Token || h1[i].Kind != h2[i].Kind {
			t.Fatalf("event %d differs: %+v vs %+v", i, h1[i], h2[i])
		}
	}
}

// TestFailoverCanBreakExclusion shows what asynchronous replication does to
// the guarantee: a failover that loses the newest grant lets a second owner
// in while the first still believes it holds — and shows that the first is
// told (Lost) at its next renewal, and how fencing tokens behave.
func TestFailoverCanBreakExclusion(t *testing.T) {
	const watchdog = 3 * time.Second
	w := sim.New(sim.Config{Seed: 7, Replicas: 1, ReplicationLag: 50 * time.Millisecond})
	a := w.NewClient(sim.ClientConfig{WatchdogTimeout: watchdog})
	b := w.NewClient(sim.ClientConfig{WatchdogTimeout: watchdog})
	first := a.Lock(context.Background(), "ledger")
	w.Advance(5 * time.Millisecond) // granted; not yet replicated
	if !acquired(first) {
		t.Fatal("a not acquired")
	}
	if !w.Failover() {
		t.Fatal("the failover lost no write; the scenario needs the grant to be lost")
	}
	second := b.Lock(context.Background(), "ledger")
	w.Advance(5 * time.Millisecond)
	if !acquired(second) || lost(first) {
		t.Fatalf("b acquired=%v, a lost=%v: expected the overlap async replication allows", acquired(second), lost(first))
	}
	overlapStart := w.Now()
	t.Logf("two holders at once after failover: tokens a=%d b=%d (the counter was rolled back with the lost write)", first.Token(), second.Token())
	if second.Token() > first.Token() {
		t.Fatalf("token %d > %d: the lost write should have rolled the fence back", second.Token(), first.Token())
	}
	// a learns at its next renewal (every watchdog/3) that Redis does not show it.
	w.Advance(watchdog/3 + 50*time.Millisecond)
	if !lost(first) || !errors.Is(first.Err(), holdfast.ErrNotOwner) {
		t.Fatalf("a not told: lost=%v err=%v", lost(first), first.Err())
	}
	var lostAt time.Time
	for _, e := range w.History() {
		if e.Kind == sim.Lost && e.Client == "c1" {
			lostAt = e.At
		}
	}
	if d := lostAt.Sub(overlapStart); d > watchdog/3 {
		t.Fatalf("the overlap lasted %v, more than one renewal interval", d)
	}
	t.Logf("overlap bounded to %v (renewal interval %v)", lostAt.Sub(overlapStart), watchdog/3)
}

// A paused client's event at the head of the queue is set aside, and the
// events behind it still wait for their time: the Advance that meets it
// must not run an event due after its end (time would then run backwards
// when Advance sets it to its end).
func TestAdvanceStopsAtItsBoundBehindAPausedClientsEvent(t *testing.T) {
	w := sim.New(sim.Config{Seed: 1, MinDelay: 5 * time.Millisecond, MaxDelay: 5 * time.Millisecond})
	c1, c2 := w.NewClient(sim.ClientConfig{}), w.NewClient(sim.ClientConfig{})
	l2 := c2.Lock(context.Background(), "b")
	w.RunUntilIdle() // c2's acquire is on its way: it reaches Redis at 5ms
	l1 := c1.Lock(context.Background(), "a")
	w.Pause(c1) // c1's enqueue, due now, heads the queue
	w.Advance(time.Millisecond)
	if got := w.Now().Sub(sim.Start); got != time.Millisecond {
		t.Fatalf("Now after Advance(1ms) = %v", got)
	}
	if keys := w.Keys(); len(keys) != 0 {
		t.Fatalf("a request due at 5ms ran within Advance(1ms): keys %v", keys)
	}
	w.Advance(4 * time.Millisecond)
	if keys := w.Keys(); len(keys) != 1 {
		t.Fatalf("c2's acquire did not run at 5ms: keys %v", keys)
	}
	w.Advance(5 * time.Millisecond)
	if !acquired(l2) || acquired(l1) {
		t.Fatalf("at 10ms: c2 acquired=%v, paused c1 acquired=%v", acquired(l2), acquired(l1))
	}
	for _, e := range w.History() {
		if e.At.After(w.Now()) || e.RanAt.After(e.At) {
			t.Fatalf("event %+v lies after Now %v or ran after it was seen", e, w.Now())
		}
	}
	w.Resume(c1)
	w.Advance(20 * time.Millisecond)
	if !acquired(l1) {
		t.Fatalf("c1 not acquired after Resume: %v", l1.Err())
	}
}

func TestAdvanceBackwardsPanics(t *testing.T) {
	w := sim.New(sim.Config{Seed: 1})
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("Advance(-1ms) did not panic")
		}
		if w.Now() != sim.Start {
			t.Fatalf("Now moved to %v", w.Now())
		}
	}()
	w.Advance(-time.Millisecond)
}

// The World's Clock reads the World's time, and a timer made on it fires
// when an Advance passes its time.
func TestWorldClockFollowsTheWorld(t *testing.T) {
	w := sim.New(sim.Config{Seed: 1})
	clk := w.Clock()
	w.Advance(time.Second)
	if got := clk.Now(); !got.Equal(sim.Start.Add(time.Second)) {
		t.Fatalf("Clock().Now() = %v after Advance(1s)", got.Sub(sim.Start))
	}
	fired := clk.Timer(500 * time.Millisecond)
	w.Advance(499 * time.Millisecond)
	select {
	case <-fired.C:
		t.Fatal("timer fired early")
	default:
	}
	w.Advance(time.Millisecond)
	select {
	case at := <-fired.C:
		if !at.Equal(sim.Start.Add(1500 * time.Millisecond)) {
			t.Fatalf("timer fired at %v", at.Sub(sim.Start))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("timer did not fire at 1.5s")
	}
}
