package holdfast_test

import (
	"context"
	"errors"
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
)

// Durations as long as a Duration goes mean "very long", never "now".
func TestOverlongDurations(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{CallTimeout: math.MaxInt64, HandoffWindow: math.MaxInt64})

	held := c.Lock(context.Background(), "long")
	mustAcquire(t, held) // every call runs under a call context of CallTimeout
	other := newClient(t, srv, holdfast.Config{})
	waiter := other.Lock(context.Background(), "long", holdfast.WithWait(math.MaxInt64))
	waitSubscribed(t, srv, "long")
	time.Sleep(10 * 10 * time.Millisecond) // ten wheel ticks: a wait timer due "now" has fired
	notLost(t, waiter)
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, waiter)
	waiter.Release(context.Background())

	for _, d := range []time.Duration{math.MaxInt64, holdfast.MaxLease + 1} {
		l := c.Lock(context.Background(), "long", holdfast.WithLease(d))
		mustLose(t, l, holdfast.ErrInvalidOption)
		cfg := holdfast.Config{Redis: srv.Client(t), WatchdogTimeout: d}
		if _, err := holdfast.New(cfg); !errors.Is(err, holdfast.ErrInvalidOption) {
			t.Fatalf("New with WatchdogTimeout %v: %v, want ErrInvalidOption", d, err)
		}
	}
	start := time.Now()
	l := c.Lock(context.Background(), "long", holdfast.WithLease(holdfast.MaxLease))
	mustAcquire(t, l)
	if d := l.Deadline(); d.Before(start.Add(holdfast.MaxLease*98/100)) || d.After(start.Add(holdfast.MaxLease)) {
		t.Fatalf("deadline %v for a lease of %v from %v", d, holdfast.MaxLease, start)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Misuse gets a clear error, never a panic: nil contexts, zero and nil
// values of Lock and Client.
func TestNilContextsAndZeroValues(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{})
	l := c.Lock(context.Background(), "misuse")
	mustAcquire(t, l)
	//lint:ignore SA1012 a nil context is the misuse under test
	if err := l.Wait(nil); !errors.Is(err, holdfast.ErrInvalidOption) { //nolint:staticcheck
		t.Fatalf("Wait(nil): %v, want ErrInvalidOption", err)
	}
	if err := l.Release(nil); !errors.Is(err, holdfast.ErrInvalidOption) { //nolint:staticcheck
		t.Fatalf("Release(nil): %v, want ErrInvalidOption", err)
	}
	notLost(t, l) // the bad Release changed nothing
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}

	var nilLock *holdfast.Lock
	for name, l := range map[string]*holdfast.Lock{"zero": {}, "nil": nilLock} {
		t.Run(name+" Lock", func(t *testing.T) {
			if err := l.Release(context.Background()); !errors.Is(err, holdfast.ErrInvalidOption) {
				t.Errorf("Release: %v", err)
			}
			if err := l.Wait(context.Background()); !errors.Is(err, holdfast.ErrInvalidOption) {
				t.Errorf("Wait: %v", err)
			}
			if err := l.Err(); !errors.Is(err, holdfast.ErrInvalidOption) {
				t.Errorf("Err: %v", err)
			}
			if l.Token() != 0 || !l.Deadline().IsZero() || l.Name() != "" {
				t.Errorf("Token %d, Deadline %v, Name %q", l.Token(), l.Deadline(), l.Name())
			}
		})
	}
	var nilClient *holdfast.Client
	for name, c := range map[string]*holdfast.Client{"zero": {}, "nil": nilClient} {
		t.Run(name+" Client", func(t *testing.T) {
			l := c.Lock(context.Background(), "misuse")
			mustLose(t, l, holdfast.ErrInvalidOption)
			if err := c.Close(); !errors.Is(err, holdfast.ErrInvalidOption) {
				t.Errorf("Close: %v", err)
			}
			if c.Actors() != 0 || c.ClientID() != "" {
				t.Errorf("Actors %d, ClientID %q", c.Actors(), c.ClientID())
			}
		})
	}
}

// Two Clients configured with the same ClientID never both hold a lock: each
// writes its own owner fields. Before owner fields carried an instance
// part, both first Locks wrote "dup:~1", and the second acquire was taken
// for a retry of the first.
func TestSharedClientIDExcludes(t *testing.T) {
	srv := redistest.Start(t)
	a := newClient(t, srv, holdfast.Config{ClientID: "dup"})
	b := newClient(t, srv, holdfast.Config{ClientID: "dup"})
	third := newClient(t, srv, holdfast.Config{})
	for _, ctx := range []context.Context{context.Background(), holdfast.WithOwner(context.Background(), "worker")} {
		la := a.Lock(ctx, "shared")
		mustAcquire(t, la)
		lb := b.Lock(ctx, "shared", holdfast.WithWait(0))
		mustLose(t, lb, holdfast.ErrWaitTimeout)
		waiting := b.Lock(ctx, "shared")
		if err := la.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		mustAcquire(t, waiting)
		lc := third.Lock(context.Background(), "shared", holdfast.WithWait(0))
		mustLose(t, lc, holdfast.ErrWaitTimeout)
		if err := waiting.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	noLockKeys(t, srv)
}

// The default ClientID names the process: HOST/PID.
func TestDefaultClientIDNamesProcess(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{})
	host, _ := os.Hostname()
	if want := host + "/" + strconv.Itoa(os.Getpid()); c.ClientID() != want {
		t.Fatalf("ClientID %q, want %q", c.ClientID(), want)
	}
	l := c.Lock(holdfast.WithOwner(context.Background(), "job:7"), "who")
	mustAcquire(t, l)
	v, err := srv.Do(t, "GET", scripts.LockKey("who")).ToString()
	hold, ok := scripts.ParseHold(v)
	if err != nil || !ok {
		t.Fatalf("lock key %q, %v", v, err)
	}
	id, instance, owner, ok := scripts.ParseField(hold.Field)
	if !ok || id != c.ClientID() || len(instance) != 12 || owner != "job:7" {
		t.Fatalf("field %q parses as %q %q %q %v", hold.Field, id, instance, owner, ok)
	}
	l.Release(context.Background())
}
