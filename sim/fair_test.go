package sim_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/sim"
)

// TestFairLockGrantsInArrivalOrder: three clients queue behind a holder;
// each release grants the next in arrival order, one message each, and
// nothing is left in Redis afterwards.
func TestFairLockGrantsInArrivalOrder(t *testing.T) {
	w := sim.New(sim.Config{Seed: 3})
	var clients []*holdfast.Client
	for i := 0; i < 4; i++ {
		clients = append(clients, w.NewClient(sim.ClientConfig{WaiterTimeout: time.Second}))
	}
	ctx := context.Background()
	first := clients[0].FairLock(ctx, "q")
	w.Advance(10 * time.Millisecond)
	if !acquired(first) {
		t.Fatalf("first not acquired: %v", first.Err())
	}
	var waiters []*holdfast.Lock
	for _, i := range []int{2, 1, 3} { // arrival order c3, c2, c4
		waiters = append(waiters, clients[i].FairLock(ctx, "q"))
		w.Advance(10 * time.Millisecond)
	}
	w.Advance(10 * time.Second) // waiters keep their places for many WaiterTimeouts
	prev := first
	for i, l := range waiters {
		if acquired(l) || lost(l) {
			t.Fatalf("waiter %d acquired=%v lost=%v (%v) before its turn", i, acquired(l), lost(l), l.Err())
		}
		if err := prev.Release(ctx); err != nil {
			t.Fatal(err)
		}
		w.Advance(20 * time.Millisecond)
		if !acquired(l) || l.Token() <= prev.Token() {
			t.Fatalf("waiter %d acquired=%v (%v) token %d after %d", i, acquired(l), l.Err(), l.Token(), prev.Token())
		}
		for _, later := range waiters[i+1:] {
			if acquired(later) {
				t.Fatalf("a later waiter was granted beside waiter %d", i)
			}
		}
		prev = l
	}
	if err := prev.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w.Advance(20 * time.Millisecond)
	for _, c := range clients {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if keys := w.Keys(); len(keys) != 0 {
		t.Fatalf("left behind: %v", keys)
	}
}

// TestFairLockKindsDoNotMix: a name held or queued as one kind refuses the
// other kind at once.
func TestFairLockKindsDoNotMix(t *testing.T) {
	w := sim.New(sim.Config{Seed: 4})
	a, b := w.NewClient(sim.ClientConfig{}), w.NewClient(sim.ClientConfig{})
	ctx := context.Background()
	plain := a.Lock(ctx, "k")
	w.Advance(10 * time.Millisecond)
	fair := b.FairLock(ctx, "k")
	w.Advance(10 * time.Millisecond)
	if !errors.Is(fair.Err(), holdfast.ErrWrongKind) {
		t.Fatalf("FairLock on a Lock-held name: %v", fair.Err())
	}
	plain.Release(ctx)
	fairHold := b.FairLock(ctx, "k")
	w.Advance(10 * time.Millisecond)
	queued := a.FairLock(ctx, "k") // a's place in the queue
	w.Advance(10 * time.Millisecond)
	if !acquired(fairHold) || acquired(queued) {
		t.Fatalf("fair hold %v, queued %v", fairHold.Err(), queued.Err())
	}
	other := w.NewClient(sim.ClientConfig{})
	wrong := other.Lock(ctx, "k")
	w.Advance(10 * time.Millisecond)
	if !errors.Is(wrong.Err(), holdfast.ErrWrongKind) {
		t.Fatalf("Lock on a FairLock-held name: %v", wrong.Err())
	}
	// Only queued (the holder gone, its grantee not yet confirmed) still
	// refuses: the queue alone marks the kind.
	local := a.Lock(ctx, "k")
	w.Advance(time.Millisecond)
	if !errors.Is(local.Err(), holdfast.ErrWrongKind) {
		t.Fatalf("Lock beside a pending FairLock of the same client: %v", local.Err())
	}
	for _, c := range []*holdfast.Client{a, b, other} {
		c.Close()
	}
}

// TestFairLockDeadWaitersSkipped: the waiters of a paused (as good as dead)
// client lose their places within WaiterTimeout, all together, and the
// next live waiter is granted; a grant to a dead waiter passes on.
func TestFairLockDeadWaitersSkipped(t *testing.T) {
	w := sim.New(sim.Config{Seed: 5})
	wt := time.Second
	holder := w.NewClient(sim.ClientConfig{ID: "h", WaiterTimeout: wt})
	dead := w.NewClient(sim.ClientConfig{ID: "d", WaiterTimeout: wt})
	live := w.NewClient(sim.ClientConfig{ID: "l", WaiterTimeout: wt})
	ctx := context.Background()
	h := holder.FairLock(ctx, "q")
	w.Advance(10 * time.Millisecond)
	d1 := dead.FairLock(ctx, "q")
	w.Advance(10 * time.Millisecond)
	l := live.FairLock(ctx, "q")
	w.Advance(10 * time.Millisecond)
	w.Pause(dead)
	w.Advance(wt + 100*time.Millisecond)
	h.Release(ctx)
	w.Advance(20 * time.Millisecond)
	if !acquired(l) {
		t.Fatalf("live waiter not granted past a dead one: %v", l.Err())
	}
	if acquired(d1) {
		t.Fatal("paused waiter granted")
	}
	// A grant that its waiter never confirms passes on after WaiterTimeout.
	h2 := holder.FairLock(ctx, "q")
	w.Advance(10 * time.Millisecond)
	d2 := w.NewClient(sim.ClientConfig{ID: "z", WaiterTimeout: wt})
	z := d2.FairLock(ctx, "q")
	w.Advance(10 * time.Millisecond)
	_ = h2
	w.Pause(holder) // h2 is queued first, behind l, then paused: a dead grantee
	l.Release(ctx)
	start := w.Now()
	for !acquired(z) && w.Now().Sub(start) < 3*wt {
		w.Advance(50 * time.Millisecond)
	}
	if !acquired(z) {
		t.Fatalf("z not granted past an unconfirmed grant: %v; keys %s", z.Err(), strings.Join(w.Keys(), " "))
	}
	if waited := w.Now().Sub(start); waited > wt+wt/2 {
		t.Fatalf("z granted %v after the release, want within about WaiterTimeout", waited)
	}
}

// TestFairRolledBackHolderLearnsAtOnce: a failover rolls back the grant of a
// fixed-lease fair hold (c1's A) while its client's second waiter (B) keeps
// its place. When Redis then grants c1 a waiter, c1 learns its hold is gone
// (Lost with ErrNotOwner long before its 20 s deadline), and B confirms its
// turn before c3's waiter C, which asked after it — rather than B's grant
// passing on unconfirmed behind a hold that no longer exists.
func TestFairRolledBackHolderLearnsAtOnce(t *testing.T) {
	w := sim.New(sim.Config{Seed: 7, Replicas: 1, MaxDelay: time.Millisecond, ReplicationLag: 300 * time.Millisecond})
	c1 := w.NewClient(sim.ClientConfig{WaiterTimeout: time.Second})
	c2 := w.NewClient(sim.ClientConfig{WaiterTimeout: time.Second, WatchdogTimeout: time.Second})
	c3 := w.NewClient(sim.ClientConfig{WaiterTimeout: time.Second})
	ctx := context.Background()
	x := c2.FairLock(ctx, "q")
	w.Advance(10 * time.Millisecond)
	if !acquired(x) {
		t.Fatalf("c2 not granted: %v", x.Err())
	}
	a := c1.FairLock(ctx, "q", holdfast.WithLease(20*time.Second))
	w.Advance(5 * time.Millisecond)
	b := c1.FairLock(ctx, "q")
	w.Advance(2 * time.Second) // the places reach the replica
	if err := x.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20 && !acquired(a); i++ {
		w.Advance(time.Millisecond)
	}
	if !acquired(a) {
		t.Fatalf("A not granted after c2's release: %v", a.Err())
	}
	if !w.Failover() {
		t.Fatal("the failover lost no write: the seed no longer rolls A's grant back")
	}
	w.Revive()
	w.Advance(10 * time.Millisecond)
	cl := c3.FairLock(ctx, "q")
	start := w.Now()
	for w.Now().Sub(start) < 15*time.Second && !acquired(b) && !acquired(cl) {
		w.Advance(10 * time.Millisecond)
	}
	if !acquired(b) || acquired(cl) {
		t.Fatalf("after the roll-back: B acquired=%v (%v), C acquired=%v: B asked first", acquired(b), b.Err(), acquired(cl))
	}
	if !lost(a) || !errors.Is(a.Err(), holdfast.ErrNotOwner) {
		t.Fatalf("A: lost=%v err=%v, want ErrNotOwner once B was granted", lost(a), a.Err())
	}
	t.Logf("B granted %v after C asked; A told %v", w.Now().Sub(start), a.Err())
	b.Release(ctx)
	w.Advance(100 * time.Millisecond)
	if !acquired(cl) {
		t.Fatalf("C not granted after B: %v", cl.Err())
	}
}
