package holdfast_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
)

// Real-Redis tests of how long a composite's Release and a RedLock's round
// may take when a node is dead or silent (issue 39): neither waits for a
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
	defer srvs[2].Thaw()

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
}

