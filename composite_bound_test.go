package holdfast_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
)

// Real-Redis tests of how long a composite's Release and a RedLock's round
// may take when a node is dead or silent: neither waits for a
// lease.

// TestRedLockReleaseWithNodeKilled: a RedLock is held on three nodes; one
// is SIGKILLed; Release returns nil within a second (the live nodes' answers;
// the dead node's key can only expire) and a rival gets the name.
func TestRedLockReleaseWithNodeKilled(t *testing.T) {
	srvs, clients := redlockClients(t, 3, holdfast.Config{})
	rivals := make([]*holdfast.Client, len(srvs))
	for i, s := range srvs {
		rivals[i] = newClient(t, s, holdfast.Config{})
	}
	ctx := context.Background()
	l := holdfast.RedLock(ctx, clients, "ledger", holdfast.WithWait(5*time.Second))
	mustAcquire(t, l)
	srvs[2].Kill()
	time.Sleep(100 * time.Millisecond)

	start := time.Now()
	err := l.Release(ctx)
	took := time.Since(start)
	t.Logf("Release after %v: %v", took.Round(time.Millisecond), err)
	if err != nil {
		t.Fatalf("Release: %v", err)
	}
	if took > time.Second {
		t.Fatalf("Release took %v with one node dead, want at most 1s", took)
	}
	mustLose(t, l, holdfast.ErrReleased)
	noLockKeys(t, srvs[0])
	noLockKeys(t, srvs[1])

	rival := holdfast.RedLock(ctx, rivals, "ledger", holdfast.WithWait(0))
	mustAcquire(t, rival)
	if err := rival.Release(ctx); err != nil {
		t.Fatalf("rival's Release: %v", err)
	}
}

// TestRedLockOneTryEndsWithoutFrozenNode: one node is SIGSTOPped and the
// name is held elsewhere on the other two: their refusals put a majority
// out of reach, so a one-try RedLock ends at once, its error naming every
// node by address with what it did.
func TestRedLockOneTryEndsWithoutFrozenNode(t *testing.T) {
	srvs, clients := redlockClients(t, 3, holdfast.Config{})
	ctx := context.Background()
	for _, s := range srvs[:2] {
		mustAcquire(t, newClient(t, s, holdfast.Config{}).Lock(ctx, "ledger"))
	}
	srvs[2].Freeze()
	thawed := false
	defer func() {
		if !thawed {
			srvs[2].Thaw()
		}
	}()

	start := time.Now()
	l := holdfast.RedLock(ctx, clients, "ledger", holdfast.WithWait(0))
	select {
	case <-l.Lost:
	case <-time.After(waitFor):
		t.Fatalf("RedLock not over within %v", waitFor)
	}
	took := time.Since(start)
	t.Logf("Lost after %v: %v", took.Round(time.Millisecond), l.Err())
	if !errors.Is(l.Err(), holdfast.ErrNoQuorum) {
		t.Fatalf("Err %v, want ErrNoQuorum", l.Err())
	}
	if took > 100*time.Millisecond {
		t.Fatalf("one try took %v with two refusals and a frozen node, want at most 100ms", took)
	}
	msg := l.Err().Error()
	for i, s := range srvs {
		if !strings.Contains(msg, s.Addr) {
			t.Errorf("error does not name node %d (%s): %s", i, s.Addr, msg)
		}
	}
	if !strings.Contains(msg, srvs[2].Addr+" no answer") {
		t.Errorf("error does not say the frozen node %s did not answer: %s", srvs[2].Addr, msg)
	}

	// The frozen node runs the try once it is thawed, and grants it (the
	// name is free there; the grant leaves its fence counter behind): the
	// part's actor gives the grant back in the background.
	srvs[2].Thaw()
	thawed = true
	deadline := time.Now().Add(waitFor)
	for len(lockKeys(t, srvs[2])) > 0 || len(srvs[2].Keys(t)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the thawed node: keys %v %v later", srvs[2].Keys(t), waitFor)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRedLockReleaseWithNodeFrozen: a node that is SIGSTOPped while the
// RedLock holds keeps Release waiting no longer than CallTimeout; its hold
// is given back in the background once it answers again.
func TestRedLockReleaseWithNodeFrozen(t *testing.T) {
	const callTimeout = 300 * time.Millisecond
	srvs, clients := redlockClients(t, 3, holdfast.Config{CallTimeout: callTimeout})
	ctx := context.Background()
	l := holdfast.RedLock(ctx, clients, "ledger", holdfast.WithWait(5*time.Second))
	mustAcquire(t, l)
	waitHeldOn(t, srvs[2], "ledger", 2)
	srvs[2].Freeze()
	thawed := false
	defer func() {
		if !thawed {
			srvs[2].Thaw()
		}
	}()

	start := time.Now()
	err := l.Release(ctx)
	took := time.Since(start)
	t.Logf("Release after %v: %v", took.Round(time.Millisecond), err)
	if err != nil {
		t.Fatalf("Release: %v", err)
	}
	if took > time.Second {
		t.Fatalf("Release took %v with one node frozen and CallTimeout %v", took, callTimeout)
	}
	mustLose(t, l, holdfast.ErrReleased)
	noLockKeys(t, srvs[0])
	noLockKeys(t, srvs[1])

	// The frozen node's part is released by its actor once it answers,
	// long before its 30 s lease would run out.
	srvs[2].Thaw()
	thawed = true
	deadline := time.Now().Add(5 * time.Second)
	for len(lockKeys(t, srvs[2])) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the thawed node still holds %v 5s later", lockKeys(t, srvs[2]))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLockAllOneTryEndsAtFirstRefusal: a one-try LockAll ends at the first
// refusal, without waiting for a frozen part's answer; the error names the
// refused part and its node.
func TestLockAllOneTryEndsAtFirstRefusal(t *testing.T) {
	a, b := redistest.Start(t), redistest.Start(t)
	ca, cb := newClient(t, a, holdfast.Config{}), newClient(t, b, holdfast.Config{})
	ctx := context.Background()
	mustAcquire(t, newClient(t, a, holdfast.Config{}).Lock(ctx, "p"))
	b.Freeze()
	defer b.Thaw()
	start := time.Now()
	l := holdfast.LockAll(ctx, []holdfast.Target{{Client: ca, Name: "p"}, {Client: cb, Name: "q"}}, holdfast.WithWait(0))
	select {
	case <-l.Lost:
	case <-time.After(waitFor):
		t.Fatalf("LockAll not over within %v", waitFor)
	}
	took := time.Since(start)
	t.Logf("Lost after %v: %v", took.Round(time.Millisecond), l.Err())
	if !errors.Is(l.Err(), holdfast.ErrWaitTimeout) {
		t.Fatalf("Err %v, want ErrWaitTimeout", l.Err())
	}
	if took > time.Second {
		t.Fatalf("one-try LockAll took %v with a part refused and the other's node frozen", took)
	}
	if msg := l.Err().Error(); !strings.Contains(msg, `"p"`) || !strings.Contains(msg, a.Addr) {
		t.Fatalf("error does not name the refused part and its node %s: %s", a.Addr, msg)
	}
}
