package holdfasttest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/holdfasttest"
)

func TestMain(m *testing.M) {
	// protoactor's dead-letter throttle sleeps out its period after a
	// Client closes, then ends: not a goroutine of this package or of
	// holdfast.
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewThrottleWithLogger.func1"))
}

// waitFor bounds every wait of these tests: reaching it is a failure.
const waitFor = 15 * time.Second

// TestEmbeddedLocks: two Clients on one embedded server exclude each other,
// hand the lock over on release with a higher token, and a hold left
// unreleased expires on the clock, as it would on Redis.
func TestEmbeddedLocks(t *testing.T) {
	url, stop, err := holdfasttest.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	a, err := holdfast.Open(url, holdfast.Config{ClientID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := holdfast.Open(url, holdfast.Config{ClientID: "b"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()

	first := a.Lock(ctx, "orders:42")
	if err := first.Wait(ctx); err != nil {
		t.Fatalf("first Lock: %v", err)
	}
	rival := b.Lock(ctx, "orders:42", holdfast.WithWait(0))
	if err := rival.Wait(ctx); !errors.Is(err, holdfast.ErrWaitTimeout) {
		t.Fatalf("a second Client's try while the lock is held: %v, want ErrWaitTimeout", err)
	}
	next := b.Lock(ctx, "orders:42")
	if err := first.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := next.Wait(ctx); err != nil {
		t.Fatalf("the waiter after the release: %v", err)
	}
	if next.Token() <= first.Token() {
		t.Fatalf("tokens %d then %d: not increasing", first.Token(), next.Token())
	}
	info, err := a.Inspect(ctx, "orders:42")
	if err != nil || info.Kind != holdfast.KindLock || len(info.Holders) != 1 {
		t.Fatalf("Inspect while b holds: %+v, %v", info, err)
	}
	if err := next.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}

	// A fixed lease that nobody releases: only its expiry on the server
	// lets the waiter in.
	leased := a.Lock(ctx, "nightly", holdfast.WithLease(200*time.Millisecond))
	if err := leased.Wait(ctx); err != nil {
		t.Fatalf("leased Lock: %v", err)
	}
	after := b.Lock(ctx, "nightly")
	if err := after.Wait(ctx); err != nil {
		t.Fatalf("the waiter for an expiring lease: %v", err)
	}
	if err := leased.Err(); !errors.Is(err, holdfast.ErrLeaseExpired) {
		t.Fatalf("the expired holder's Err: %v, want ErrLeaseExpired", err)
	}
	if err := after.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// TestEmbeddedServersAreApart: each call starts a server of its own, and
// stop stops it.
func TestEmbeddedServersAreApart(t *testing.T) {
	url1, stop1, err := holdfasttest.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	url2, stop2, err := holdfasttest.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	defer stop2()
	if url1 == url2 {
		t.Fatalf("two servers on one URL %s", url1)
	}
	a, err := holdfast.Open(url1, holdfast.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := holdfast.Open(url2, holdfast.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	l1 := a.Lock(ctx, "x")
	l2 := b.Lock(ctx, "x", holdfast.WithWait(0))
	if err := l1.Wait(ctx); err != nil {
		t.Fatalf("on the first server: %v", err)
	}
	if err := l2.Wait(ctx); err != nil {
		t.Fatalf("the same name on the second server: %v", err)
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	stop1()
	if _, err := holdfast.Open(url1, holdfast.Config{}); err == nil {
		t.Fatalf("Open on a stopped server succeeded")
	}
}

// TestNewClient: the Client works, and is closed (its Locks with it) and
// its server stopped when the test ends.
func TestNewClient(t *testing.T) {
	var held *holdfast.Lock
	t.Run("inner", func(t *testing.T) {
		c := holdfasttest.NewClient(t, holdfast.Config{ClientID: "tester"})
		if c.ClientID() != "tester" {
			t.Fatalf("ClientID %q: cfg not passed", c.ClientID())
		}
		held = c.Lock(context.Background(), "job")
		if err := held.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	select {
	case <-held.Lost:
	case <-time.After(waitFor):
		t.Fatal("the Lock outlived the test that made its Client")
	}
	if err := held.Err(); !errors.Is(err, holdfast.ErrClosed) {
		t.Fatalf("the Lock ended with %v, want ErrClosed", err)
	}
}
