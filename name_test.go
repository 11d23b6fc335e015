package holdfast_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
	"github.com/holdfast/holdfast/sim"
)

// The Lock keeps no copy of its name: Name reads it from the Lock's Ref (the
// engine's entry or ref, the composite, or the name of a Lock that never
// started). These tests hold Name to the name asked for in every case, from
// the moment the Lock is returned, on any goroutine.

// nameWatch reads l.Name on another goroutine until stop is closed, and
// reports the first wrong answer: with -race, a read that races the Lock's
// set-up shows too.
func nameWatch(t *testing.T, l *holdfast.Lock, want string) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	var got string
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if n := l.Name(); n != want && got == "" {
				got = n + "\x00" // "" is a wrong answer too
			}
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	return func() {
		t.Helper()
		close(done)
		wg.Wait()
		if got != "" {
			t.Errorf("Name() = %q on another goroutine, want %q", strings.TrimSuffix(got, "\x00"), want)
		}
	}
}

func TestLockNameStarted(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{})
	ctx := context.Background()
	for _, tc := range []struct {
		what string
		lock func(name string) *holdfast.Lock
	}{
		{"Lock", func(n string) *holdfast.Lock { return c.Lock(ctx, n) }},
		{"Lock/cancellable", func(n string) *holdfast.Lock {
			cctx, cancel := context.WithCancel(ctx)
			t.Cleanup(cancel)
			return c.Lock(cctx, n)
		}},
		{"FairLock", func(n string) *holdfast.Lock { return c.FairLock(ctx, n) }},
		{"ReadLock", func(n string) *holdfast.Lock { return c.ReadLock(ctx, n) }},
		{"WriteLock", func(n string) *holdfast.Lock { return c.WriteLock(ctx, n) }},
		{"Semaphore", func(n string) *holdfast.Lock { return c.Semaphore(ctx, n, 2) }},
		{"Elect", func(n string) *holdfast.Lock { return c.Elect(ctx, n, "me") }},
	} {
		name := "name-" + tc.what
		l := tc.lock(name)
		stop := nameWatch(t, l, name)
		if got := l.Name(); got != name {
			t.Errorf("%s: Name() = %q just after the call, want %q", tc.what, got, name)
		}
		mustAcquire(t, l)
		if got := l.Name(); got != name {
			t.Errorf("%s: Name() = %q held, want %q", tc.what, got, name)
		}
		// A second Lock of the name waits on the same actor.
		w := c.Lock(ctx, name, holdfast.WithWait(0))
		<-w.Lost
		if got := w.Name(); got != name {
			t.Errorf("%s: Name() of a refused Lock = %q, want %q", tc.what, got, name)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("%s: Release: %v", tc.what, err)
		}
		stop()
		if got := l.Name(); got != name {
			t.Errorf("%s: Name() = %q released, want %q", tc.what, got, name)
		}
	}
}

func TestLockNameSim(t *testing.T) {
	w := sim.New(sim.Config{Seed: 1})
	a, b := w.NewClient(sim.ClientConfig{}), w.NewClient(sim.ClientConfig{})
	ctx := context.Background()
	l := a.Lock(ctx, "sim-name")
	if got := l.Name(); got != "sim-name" {
		t.Errorf("Name() = %q before the World ran, want sim-name", got)
	}
	if err := l.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	all := holdfast.LockAll(ctx, []holdfast.Target{{Client: a, Name: "p"}, {Client: b, Name: "q"}})
	if err := all.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for l, want := range map[*holdfast.Lock]string{l: "sim-name", all: "p,q"} {
		if got := l.Name(); got != want {
			t.Errorf("Name() = %q held, want %q", got, want)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if got := l.Name(); got != want {
			t.Errorf("Name() = %q released, want %q", got, want)
		}
	}
	// Closed: the engine refuses the request.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if l := a.Lock(ctx, "after-close"); l.Name() != "after-close" || !errors.Is(l.Err(), holdfast.ErrClosed) {
		t.Errorf("after Close: Name() = %q, Err() = %v; want after-close, ErrClosed", l.Name(), l.Err())
	}
}

func TestLockNameEndedBeforeStart(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{})
	ctx := context.Background()
	var none *holdfast.Client
	for _, tc := range []struct {
		what, name string
		l          *holdfast.Lock
		err        error
	}{
		{"nil Client", "n1", none.Lock(ctx, "n1"), holdfast.ErrInvalidOption},
		{"nil ctx", "n2", c.Lock(nil, "n2"), holdfast.ErrInvalidOption}, //nolint:staticcheck // on purpose
		{"bad name", "", c.Lock(ctx, ""), holdfast.ErrInvalidName},
		{"bad option", "n3", c.Lock(ctx, "n3", holdfast.WithLease(-time.Second)), holdfast.ErrInvalidOption},
		{"bad permits", "n4", c.Semaphore(ctx, "n4", 0), holdfast.ErrInvalidOption},
		{"bad value", "n5", c.Elect(ctx, "n5", ""), holdfast.ErrInvalidValue},
		{"LockAll without targets", "", holdfast.LockAll(ctx, nil), holdfast.ErrInvalidOption},
		{"LockAll twice a target", "t,t", holdfast.LockAll(ctx, []holdfast.Target{{Client: c, Name: "t"}, {Client: c, Name: "t"}}), holdfast.ErrInvalidOption},
		{"RedLock with a nil Client", "r", holdfast.RedLock(ctx, []*holdfast.Client{c, nil, c}, "r"), holdfast.ErrInvalidOption},
	} {
		select {
		case <-tc.l.Lost:
		default:
			t.Fatalf("%s: Lock not over", tc.what)
		}
		if !errors.Is(tc.l.Err(), tc.err) {
			t.Errorf("%s: Err() = %v, want %v", tc.what, tc.l.Err(), tc.err)
		}
		if got := tc.l.Name(); got != tc.name {
			t.Errorf("%s: Name() = %q, want %q", tc.what, got, tc.name)
		}
	}
	var nilLock *holdfast.Lock
	if got := nilLock.Name(); got != "" {
		t.Errorf("nil Lock: Name() = %q", got)
	}
	if got := new(holdfast.Lock).Name(); got != "" {
		t.Errorf("zero Lock: Name() = %q", got)
	}

	// A closed Client: the engine refuses the request (Enqueue fails).
	closed := newClient(t, srv, holdfast.Config{})
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*holdfast.Lock{
		closed.Lock(ctx, "c1"),
		closed.Lock(holdfast.WithOwner(ctx, "o"), "c1"),
		closed.Semaphore(ctx, "c1", 3),
		holdfast.LockAll(ctx, []holdfast.Target{{Client: closed, Name: "c1"}}),
	} {
		<-l.Lost
		if l.Name() != "c1" || !errors.Is(l.Err(), holdfast.ErrClosed) {
			t.Errorf("closed Client: Name() = %q, Err() = %v; want c1, ErrClosed", l.Name(), l.Err())
		}
	}
}

func TestLockNameComposite(t *testing.T) {
	srvs := []*redistest.Server{redistest.Start(t), redistest.Start(t), redistest.Start(t)}
	var cs []*holdfast.Client
	for _, s := range srvs {
		cs = append(cs, newClient(t, s, holdfast.Config{}))
	}
	ctx := context.Background()
	all := holdfast.LockAll(ctx, []holdfast.Target{{Client: cs[0], Name: "b"}, {Client: cs[1], Name: "a"}})
	red := holdfast.RedLock(ctx, cs, "red")
	for l, want := range map[*holdfast.Lock]string{all: "b,a", red: "red"} {
		stop := nameWatch(t, l, want)
		mustAcquire(t, l)
		if got := l.Name(); got != want {
			t.Errorf("Name() = %q held, want %q", got, want)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		stop()
	}
	// A RedLock that cannot win names its lock in its error.
	taken := cs[0].Lock(ctx, "red2")
	mustAcquire(t, taken)
	taken2 := cs[1].Lock(ctx, "red2")
	mustAcquire(t, taken2)
	lost := holdfast.RedLock(ctx, cs, "red2", holdfast.WithWait(0))
	mustLose(t, lost, holdfast.ErrNoQuorum)
	if lost.Name() != "red2" || !strings.Contains(lost.Err().Error(), `"red2"`) {
		t.Errorf("RedLock: Name() = %q, Err() = %v; want red2 in both", lost.Name(), lost.Err())
	}
}

// TestLogsNameTheLock: the log lines of a grant, a release, a refusal by
// Redis and a loss, which the lock's actor writes, name the lock.
func TestLogsNameTheLock(t *testing.T) {
	srv := redistest.Start(t)
	logs := &records{}
	c := newClient(t, srv, holdfast.Config{Logger: slog.New(logs), WatchdogTimeout: time.Second})
	ctx := context.Background()

	l := c.Lock(ctx, "logged")
	mustAcquire(t, l)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Do(t, "SET", scripts.LockKey("wrongtype"), "x")
	refused := c.Lock(ctx, "wrongtype")
	<-refused.Lost
	lost := c.Lock(ctx, "lost")
	mustAcquire(t, lost)
	srv.Do(t, "DEL", scripts.LockKey("lost"))
	mustLose(t, lost, holdfast.ErrNotOwner)

	for _, want := range []struct {
		level     slog.Level
		msg, name string
	}{
		{slog.LevelDebug, "lock granted", "logged"},
		{slog.LevelDebug, "lock released", "logged"},
		{slog.LevelWarn, "lock refused by Redis", "wrongtype"},
		{slog.LevelDebug, "lock granted", "lost"},
		{slog.LevelWarn, "lock lost", "lost"},
	} {
		a, ok := logs.findAttr(want.level, want.msg, "name", want.name)
		if !ok {
			t.Errorf("no %q log naming %q", want.msg, want.name)
			continue
		}
		if a["owner"] == "" {
			t.Errorf("%q log of %q names no owner: %v", want.msg, want.name, a)
		}
	}
}
