package holdfast_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
)

// A RedLock holds every node that grants, so the crash of any one node of
// three leaves it a majority: it stays held, renewed on the two left, and
// Release answers.
func TestRedLockSurvivesCrashOfAHoldingNode(t *testing.T) {
	srvs, clients := redlockClients(t, 3, holdfast.Config{WatchdogTimeout: time.Second, CallTimeout: 200 * time.Millisecond})
	ctx := context.Background()
	l := holdfast.RedLock(ctx, clients, "ledger", holdfast.WithWait(5*time.Second))
	mustAcquire(t, l)
	// Every node holds the name (the late grants of the round joined the
	// hold): a plain Lock on any of them is refused.
	for i, s := range srvs {
		waitHeldOn(t, s, "ledger", i)
		other := newClient(t, s, holdfast.Config{})
		mustLose(t, other.Lock(ctx, "ledger", holdfast.WithWait(0)), holdfast.ErrWaitTimeout)
	}
	srvs[0].Kill()
	// Four watchdog periods later the hold lives on the other two.
	select {
	case <-l.Lost:
		t.Fatalf("RedLock lost after one node of three crashed: %v", l.Err())
	case <-time.After(4 * time.Second):
	}
	if !l.Deadline().After(time.Now()) {
		t.Fatalf("deadline %v passed while held", l.Deadline())
	}
	rc, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := l.Release(rc); err != nil {
		t.Fatalf("Release: %v", err)
	}
	noLockKeys(t, srvs[1])
	noLockKeys(t, srvs[2])
}

// waitHeldOn waits (briefly) until server s keeps a hold of name: a late grant
// of the round may still be on its way when Acquired closes.
func waitHeldOn(t *testing.T, s interface {
	Keys(testing.TB) []string
}, name string, i int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		for _, k := range s.Keys(t) {
			if k == "holdfast:{"+name+"}" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d does not hold %q: keys %v", i, name, s.Keys(t))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A one-try RedLock against a held name answers after one round of calls,
// not after a round's wait.
func TestRedLockTryOnceAnswersAtOnce(t *testing.T) {
	_, clients := redlockClients(t, 3, holdfast.Config{})
	ctx := context.Background()
	holder := holdfast.RedLock(ctx, clients, "ledger")
	mustAcquire(t, holder)
	start := time.Now()
	l := holdfast.RedLock(ctx, clients, "ledger", holdfast.WithWait(0))
	mustLose(t, l, holdfast.ErrNoQuorum)
	took := time.Since(start)
	t.Logf("one-try RedLock ended after %v: %v", took.Round(time.Millisecond), l.Err())
	if took > time.Second {
		t.Fatalf("one-try RedLock took %v to give up, want one round of calls (< 1s)", took)
	}
	if !errors.Is(l.Err(), holdfast.ErrWaitTimeout) {
		t.Errorf("err %v does not wrap ErrWaitTimeout", l.Err())
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// Five fair holders whose 500 ms leases run out unreleased are granted in
// arrival order, each within a round trip and a tick of the previous lease's
// end (it took about WaiterTimeout, 5 s, when a confirmed grant kept the
// confirmation window as its TTL, and up to WaiterTimeout/3 more for a
// waiter whose call raced the head's confirmation).
func TestFairExpiredHoldsPassOnInOrder(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	const n, lease = 5, 500 * time.Millisecond
	locks := make([]*holdfast.Lock, n)
	inspector := newClient(t, srv, holdfast.Config{})
	for i := range locks {
		c := newClient(t, srv, holdfast.Config{})
		locks[i] = c.FairLock(ctx, "payouts", holdfast.WithLease(lease), holdfast.WithWait(20*time.Second))
		if i == 0 {
			mustAcquire(t, locks[0])
			continue
		}
		// Queued in Redis before the next one asks: arrival order is known.
		deadline := time.Now().Add(5 * time.Second)
		for {
			info, err := inspector.Inspect(ctx, "payouts")
			if err != nil {
				t.Fatal(err)
			}
			if info.Waiters >= i {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiter %d not queued: %+v", i, info)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	for i := 1; i < n; i++ {
		prevEnd := locks[i-1].Deadline() // the previous hold's validity end, on our clock
		select {
		case <-locks[i].Acquired:
		case <-locks[i].Lost:
			t.Fatalf("holder %d lost before acquired: %v", i, locks[i].Err())
		case <-time.After(10 * time.Second):
			t.Fatalf("holder %d not granted 10s after the previous lease", i)
		}
		late := time.Since(prevEnd)
		t.Logf("holder %d granted %v after the previous hold's deadline", i, late.Round(time.Millisecond))
		for j := i + 1; j < n; j++ {
			if isClosed(locks[j].Acquired) {
				t.Fatalf("holder %d granted before holder %d: not in arrival order", j, i)
			}
		}
		// Within a round trip and a tick; 400 ms is generous for a loaded
		// machine. A waiter whose call raced the head's confirmation at the
		// same expiry looks again within a quarter of its lease, so it
		// learns the next lease before that one ends.
		if late > 400*time.Millisecond {
			t.Fatalf("holder %d granted %v after the previous lease ended, want within 400ms", i, late)
		}
	}
	mustLose(t, locks[n-1], holdfast.ErrLeaseExpired)
}
