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

// Real-Redis tests of a plain Lock's Release when Redis cannot confirm it:
// it answers ErrReleaseUnconfirmed within CallTimeout, never a lease.

// releaseBound is how long a Release may take when its node cannot
// confirm: a call's timeout, and a margin for the machine's scheduling.
const (
	boundCallTimeout = time.Second
	releaseBound     = boundCallTimeout + 200*time.Millisecond
)

// releaseUnconfirmed releases l and checks that Release answered
// ErrReleaseUnconfirmed within releaseBound and that l is over all the same.
func releaseUnconfirmed(t *testing.T, l *holdfast.Lock) {
	t.Helper()
	start := time.Now()
	err := l.Release(context.Background())
	took := time.Since(start)
	t.Logf("Release after %v: %v", took.Round(time.Millisecond), err)
	if !errors.Is(err, holdfast.ErrReleaseUnconfirmed) {
		t.Fatalf("Release = %v, want ErrReleaseUnconfirmed", err)
	}
	if took > releaseBound {
		t.Fatalf("Release took %v, want at most CallTimeout (%v) + 200ms", took, boundCallTimeout)
	}
	select {
	case <-l.Lost:
	default:
		t.Fatal("Lost not closed when Release answered")
	}
	if e := l.Err(); !errors.Is(e, holdfast.ErrReleased) || !errors.Is(e, holdfast.ErrReleaseUnconfirmed) {
		t.Fatalf("Err = %v, want ErrReleased and ErrReleaseUnconfirmed", e)
	}
	if again := l.Release(context.Background()); !errors.Is(again, holdfast.ErrNotHeld) {
		t.Fatalf("second Release = %v, want ErrNotHeld", again)
	}
}

// TestReleaseWithNodeKilled: the only node of a held Lock and a held
// FairLock is SIGKILLed.
func TestReleaseWithNodeKilled(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{CallTimeout: boundCallTimeout})
	plain := c.Lock(context.Background(), "killed")
	fair := c.FairLock(context.Background(), "killed-fair")
	mustAcquire(t, plain)
	mustAcquire(t, fair)
	srv.Kill()
	releaseUnconfirmed(t, plain)
	releaseUnconfirmed(t, fair)
}

// TestReleaseWithNodeFrozen: the node of a held Lock is SIGSTOPped; Release
// answers when the release call times out, and the release goes on in the
// background: once the node answers again, the key is gone long before its
// lease would end.
func TestReleaseWithNodeFrozen(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{CallTimeout: boundCallTimeout})
	l := c.Lock(context.Background(), "frozen")
	mustAcquire(t, l)
	srv.Freeze()
	releaseUnconfirmed(t, l)
	srv.Thaw()
	deadline := time.Now().Add(10 * time.Second) // the lease is 30s
	for len(lockKeys(t, srv)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the thawed node still holds %v 10s later", lockKeys(t, srv))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The name is free for the next Lock of the same Client.
	next := c.Lock(context.Background(), "frozen", holdfast.WithWait(5*time.Second))
	mustAcquire(t, next)
	if err := next.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestLockAllReleaseNamesUnconfirmedPart: one of a LockAll's two servers is
// SIGKILLed; Release answers ErrReleaseUnconfirmed within CallTimeout, naming
// the dead part and not the live one, which is released.
func TestLockAllReleaseNamesUnconfirmedPart(t *testing.T) {
	a, b := redistest.Start(t), redistest.Start(t)
	cfg := holdfast.Config{CallTimeout: boundCallTimeout}
	ca, cb := newClient(t, a, cfg), newClient(t, b, cfg)
	l := holdfast.LockAll(context.Background(), []holdfast.Target{{Client: ca, Name: "live-part"}, {Client: cb, Name: "dead-part"}})
	mustAcquire(t, l)
	b.Kill()
	start := time.Now()
	err := l.Release(context.Background())
	took := time.Since(start)
	t.Logf("Release after %v: %v", took.Round(time.Millisecond), err)
	if !errors.Is(err, holdfast.ErrReleaseUnconfirmed) || !strings.Contains(err.Error(), `"dead-part"`) || strings.Contains(err.Error(), `"live-part"`) {
		t.Fatalf("Release = %v, want ErrReleaseUnconfirmed naming dead-part alone", err)
	}
	if took > releaseBound {
		t.Fatalf("Release took %v, want at most CallTimeout (%v) + 200ms", took, boundCallTimeout)
	}
	mustLose(t, l, holdfast.ErrReleased)
	noLockKeys(t, a)
}

// TestRedLockReleaseOneOfThreeKilled: a RedLock whose release leaves a
// majority of its nodes free answers nil, one dead node or not.
func TestRedLockReleaseOneOfThreeKilled(t *testing.T) {
	srvs, clients := redlockClients(t, 3, holdfast.Config{CallTimeout: boundCallTimeout})
	l := holdfast.RedLock(context.Background(), clients, "ledger-bound", holdfast.WithWait(5*time.Second))
	mustAcquire(t, l)
	waitHeldOn(t, srvs[2], "ledger-bound", 2)
	srvs[2].Kill()
	start := time.Now()
	err := l.Release(context.Background())
	took := time.Since(start)
	t.Logf("Release after %v: %v", took.Round(time.Millisecond), err)
	if err != nil {
		t.Fatalf("Release = %v, want nil (two of three nodes confirmed)", err)
	}
	if took > releaseBound {
		t.Fatalf("Release took %v, want at most CallTimeout (%v) + 200ms", took, boundCallTimeout)
	}
	noLockKeys(t, srvs[0])
	noLockKeys(t, srvs[1])
}

// TestRedLockReleaseTwoOfThreeKilled: with two of its three nodes dead, no
// majority is free until their keys run out: Release says so, naming them.
func TestRedLockReleaseTwoOfThreeKilled(t *testing.T) {
	srvs, clients := redlockClients(t, 3, holdfast.Config{CallTimeout: boundCallTimeout})
	l := holdfast.RedLock(context.Background(), clients, "ledger-two", holdfast.WithWait(5*time.Second))
	mustAcquire(t, l)
	waitHeldOn(t, srvs[1], "ledger-two", 1)
	waitHeldOn(t, srvs[2], "ledger-two", 2)
	srvs[1].Kill()
	srvs[2].Kill()
	err := l.Release(context.Background())
	if !errors.Is(err, holdfast.ErrReleaseUnconfirmed) || strings.Count(err.Error(), "RedLock part") != 2 {
		t.Fatalf("Release = %v, want ErrReleaseUnconfirmed naming the two dead nodes", err)
	}
	mustLose(t, l, holdfast.ErrReleased)
	noLockKeys(t, srvs[0])
}

// TestReleaseAsleepWithNodeKilled: a hold held quietly sleeps (no actor);
// its Release with the node SIGKILLed is bounded the same way.
func TestReleaseAsleepWithNodeKilled(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{CallTimeout: boundCallTimeout})
	l := c.Lock(context.Background(), "asleep")
	mustAcquire(t, l)
	eventually(t, "the quiet hold asleep", func() bool { return c.Actors() == 0 })
	srv.Kill()
	releaseUnconfirmed(t, l)
}
