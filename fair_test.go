package holdfast_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
)

// waitPlaces waits until the fair queue of name holds n places.
func waitPlaces(t *testing.T, srv *redistest.Server, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for time.Now().Before(deadline) {
		all, _ := srv.Do(t, "HGETALL", scripts.FairQueueKey(name)).AsStrMap()
		delete(all, "seq")
		if len(all) == n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("fair queue of %q never held %d places", name, n)
}

// grantOrder releases holder, then each lock as it is granted, and returns
// the order of the grants, failing if two locks are held at once.
func grantOrder(t *testing.T, holder *holdfast.Lock, waiters map[string]*holdfast.Lock) []string {
	t.Helper()
	ctx := context.Background()
	var order []string
	current := holder
	for len(order) < len(waiters) {
		if err := current.Release(ctx); err != nil {
			t.Fatal(err)
		}
		deadline := time.After(waitFor)
		var next string
		for next == "" {
			for name, l := range waiters {
				if contains(order, name) {
					continue
				}
				select {
				case <-l.Acquired:
					next = name
				case <-l.Lost:
					t.Fatalf("%s lost: %v", name, l.Err())
				default:
				}
			}
			select {
			case <-deadline:
				t.Fatalf("nobody granted after %v; order so far %v", order, waitFor)
			case <-time.After(time.Millisecond):
			}
		}
		// Only one at a time: nobody else may be granted while next holds.
		for name, l := range waiters {
			if name != next && !contains(order, name) && acquiredNow(l) {
				t.Fatalf("%s and %s granted together", next, name)
			}
		}
		order = append(order, next)
		current = waiters[next]
	}
	if err := current.Release(ctx); err != nil {
		t.Fatal(err)
	}
	return order
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func acquiredNow(l *holdfast.Lock) bool {
	select {
	case <-l.Acquired:
		return true
	default:
		return false
	}
}

// TestFairLockFIFOAcrossClients: waiters of two Clients are granted in the
// order they queued, and a FairLock asked right after a release (by the
// releasing Client itself) does not overtake them.
func TestFairLockFIFOAcrossClients(t *testing.T) {
	srv := redistest.Start(t)
	h := newClient(t, srv, holdfast.Config{ClientID: "h"})
	a := newClient(t, srv, holdfast.Config{ClientID: "a"})
	b := newClient(t, srv, holdfast.Config{ClientID: "b"})
	ctx := context.Background()
	holder := h.FairLock(ctx, "fifo")
	mustAcquire(t, holder)
	waiters := map[string]*holdfast.Lock{}
	waiters["a1"] = a.FairLock(ctx, "fifo")
	waitPlaces(t, srv, "fifo", 1)
	waiters["b1"] = b.FairLock(ctx, "fifo")
	waitPlaces(t, srv, "fifo", 2)
	waiters["a2"] = a.FairLock(ctx, "fifo") // behind a1 in a: it takes its place all the same
	waitPlaces(t, srv, "fifo", 3)
	waiters["b2"] = b.FairLock(ctx, "fifo")
	waitPlaces(t, srv, "fifo", 4)
	// No barging: the holder asks again the moment it releases.
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waiters["h2"] = h.FairLock(ctx, "fifo")
	var first string
	deadline := time.After(waitFor)
	for first == "" {
		for name, l := range waiters {
			if acquiredNow(l) {
				first = name
			}
		}
		select {
		case <-deadline:
			t.Fatal("nobody granted after the release")
		case <-time.After(time.Millisecond):
		}
	}
	if first != "a1" {
		t.Fatalf("%s granted first, want a1", first)
	}
	order := append([]string{"a1"}, grantOrder(t, waiters["a1"], without(waiters, "a1"))...)
	if got, want := strings.Join(order, " "), "a1 b1 a2 b2 h2"; got != want {
		t.Fatalf("grant order %s, want %s", got, want)
	}
	noLockKeys(t, srv)
}

func without(m map[string]*holdfast.Lock, key string) map[string]*holdfast.Lock {
	out := map[string]*holdfast.Lock{}
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}

// TestFairLockLiveWaiterKeepsItsPlace: a waiter that waits three
// WaiterTimeouts keeps its place and is granted at the release.
func TestFairLockLiveWaiterKeepsItsPlace(t *testing.T) {
	srv := redistest.Start(t)
	wt := 300 * time.Millisecond
	a := newClient(t, srv, holdfast.Config{WaiterTimeout: wt})
	b := newClient(t, srv, holdfast.Config{WaiterTimeout: wt})
	ctx := context.Background()
	holder := a.FairLock(ctx, "patient")
	mustAcquire(t, holder)
	w := b.FairLock(ctx, "patient")
	waitPlaces(t, srv, "patient", 1)
	time.Sleep(3*wt + wt/2)
	waitPlaces(t, srv, "patient", 1) // still queued
	// A newcomer queues behind it.
	late := a.FairLock(context.Background(), "patient")
	_ = late
	released := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, w)
	t.Logf("granted %v after the release, having waited %v", time.Since(released), 3*wt+wt/2)
	if acquiredNow(late) {
		t.Fatal("the newcomer was granted beside the patient waiter")
	}
	w.Release(ctx)
	mustAcquire(t, late)
	late.Release(ctx)
}

// TestFairLockKindsRefuseEachOther: a name held as Lock refuses FairLock
// with ErrWrongKind at once, and the other way round.
func TestFairLockKindsRefuseEachOther(t *testing.T) {
	srv := redistest.Start(t)
	a := newClient(t, srv, holdfast.Config{})
	b := newClient(t, srv, holdfast.Config{})
	ctx := context.Background()
	plain := a.Lock(ctx, "mixed")
	mustAcquire(t, plain)
	mustLose(t, b.FairLock(ctx, "mixed"), holdfast.ErrWrongKind)
	plain.Release(ctx)
	fair := a.FairLock(ctx, "mixed")
	mustAcquire(t, fair)
	mustLose(t, b.Lock(ctx, "mixed"), holdfast.ErrWrongKind)
	// Queued only: the holder's key gone by hand, a waiter's place remains.
	queued := b.FairLock(ctx, "mixed")
	waitPlaces(t, srv, "mixed", 1)
	c := newClient(t, srv, holdfast.Config{})
	mustLose(t, c.Lock(ctx, "mixed"), holdfast.ErrWrongKind)
	fair.Release(ctx)
	mustAcquire(t, queued)
	queued.Release(ctx)
	// Free again: either kind may take it.
	again := c.Lock(ctx, "mixed")
	mustAcquire(t, again)
	again.Release(ctx)
	noLockKeys(t, srv)
}

// fairChildMode makes the child process a fair waiter (see runFairChild).
const fairChildMode = "HOLDFAST_TEST_CHILD_FAIR"

// runFairChild queues a FairLock on "fair-crash" with a 1s WaiterTimeout
// (under LayoutRedisson when fairChildMode is "redisson"), prints
// "waiting" and waits until it is killed.
func runFairChild() {
	cfg := holdfast.Config{ClientID: "child", WaiterTimeout: time.Second}
	if os.Getenv(fairChildMode) == "redisson" {
		cfg.Layout = holdfast.LayoutRedisson
	}
	c := childClient(cfg)
	l := c.FairLock(context.Background(), "fair-crash")
	fmt.Println("waiting")
	<-l.Lost
	fmt.Println("lost", l.Err())
	os.Exit(1)
}

// TestFairLockKilledWaiterSkipped: a waiter process killed with SIGKILL
// does not hold up the queue: the next live waiter is granted within
// WaiterTimeout of the release (the dead waiter's place has lapsed, or its
// unconfirmed grant passes on).
func TestFairLockKilledWaiterSkipped(t *testing.T) {
	srv := redistest.Start(t)
	wt := time.Second
	h := newClient(t, srv, holdfast.Config{WaiterTimeout: wt})
	ctx := context.Background()
	holder := h.FairLock(ctx, "fair-crash")
	mustAcquire(t, holder)
	cmd := startChild(t, "waiting", childEnv+"="+srv.Addr, fairChildMode+"=1")
	waitPlaces(t, srv, "fair-crash", 1)
	live := newClient(t, srv, holdfast.Config{WaiterTimeout: wt}).FairLock(ctx, "fair-crash")
	waitPlaces(t, srv, "fair-crash", 2)
	time.Sleep(wt / 2) // the child keeps its place meanwhile
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Release at once: the dead child is still at the head with a live
	// deadline, so the grant goes to it and must pass on unconfirmed.
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	mustAcquire(t, live)
	took := time.Since(released)
	t.Logf("live waiter granted %v after the release past a SIGKILLed waiter (WaiterTimeout %v)", took, wt)
	if took > wt+wt/2 {
		t.Fatalf("granted after %v, more than WaiterTimeout + margin", took)
	}
	live.Release(ctx)
	if n, _ := srv.Do(t, "EXISTS", scripts.FairQueueKey("fair-crash")).AsInt64(); n != 0 {
		t.Fatal("the dead waiter's place is still queued")
	}
}
