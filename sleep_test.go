package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
)

// Held locks sleep: an actor whose only business is one quiet hold folds
// into a record after the idle linger (actor.DefaultIdleTimeout), which
// renews the lease itself and wakes the actor for anything else.

// waitAsleep waits until n of c's locks sleep and no actor runs.
func waitAsleep(t *testing.T, c *holdfast.Client, n int) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for holdfast.Sleeping(c) != n || c.Actors() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d locks asleep and %d actors running, want %d and 0", holdfast.Sleeping(c), c.Actors(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func pttl(t *testing.T, srv *redistest.Server, name string) time.Duration {
	t.Helper()
	ms, err := srv.Do(t, "PTTL", scripts.LockKey(name)).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(ms) * time.Millisecond
}

func TestSleepingLockKeepsItsLeaseAndReleases(t *testing.T) {
	srv := redistest.Start(t)
	const lease = 900 * time.Millisecond // renewed every 300ms
	c := newClient(t, srv, holdfast.Config{WatchdogTimeout: lease})
	l := c.Lock(context.Background(), "sleeper")
	mustAcquire(t, l)
	token := l.Token()
	waitAsleep(t, c, 1)
	// Asleep for several leases: only the record's renewals keep it.
	before := l.Deadline()
	time.Sleep(3 * lease)
	notLost(t, l)
	waitAsleep(t, c, 1)
	if !l.Deadline().After(before.Add(lease)) {
		t.Fatalf("deadline %v after 3 leases asleep, was %v: the record did not tell the Lock of its renewals", l.Deadline(), before)
	}
	if left := pttl(t, srv, "sleeper"); left <= 0 || left > lease {
		t.Fatalf("PTTL %v of a sleeping hold, want within the lease %v", left, lease)
	}
	if l.Token() != token {
		t.Fatalf("token %d changed to %d", token, l.Token())
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release of a sleeping lock: %v", err)
	}
	mustLose(t, l, holdfast.ErrReleased)
	noLockKeys(t, srv)
	if err := l.Release(context.Background()); !errors.Is(err, holdfast.ErrNotHeld) {
		t.Fatalf("second Release: %v, want ErrNotHeld", err)
	}
}

func TestSleepingLockLearnsItWasDeleted(t *testing.T) {
	srv := redistest.Start(t)
	const lease = 900 * time.Millisecond
	c := newClient(t, srv, holdfast.Config{WatchdogTimeout: lease})
	l := c.Lock(context.Background(), "sleeper")
	mustAcquire(t, l)
	waitAsleep(t, c, 1)
	srv.Do(t, "DEL", scripts.LockKey("sleeper"))
	mustLose(t, l, holdfast.ErrNotOwner)
	if holdfast.Sleeping(c) != 0 {
		t.Fatal("a lost lock still sleeps")
	}
}

func TestSleepingLockWakesForOthers(t *testing.T) {
	srv := redistest.Start(t)
	const lease = 900 * time.Millisecond
	c := newClient(t, srv, holdfast.Config{WatchdogTimeout: lease})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	held := c.Lock(ctx, "sleeper")
	mustAcquire(t, held)
	waitAsleep(t, c, 1)

	// A reentry of the same owner, and a waiter of another.
	octx := holdfast.WithOwner(context.Background(), "other")
	waiter := c.Lock(octx, "sleeper")
	time.Sleep(50 * time.Millisecond)
	select {
	case <-waiter.Acquired:
		t.Fatal("a waiter took a sleeping lock")
	default:
	}
	// The holder's context ends: the woken actor releases it and the
	// waiter takes it.
	cancel()
	mustLose(t, held, context.Canceled)
	mustAcquire(t, waiter)
	if waiter.Token() <= held.Token() {
		t.Fatalf("token %d after %d", waiter.Token(), held.Token())
	}
	waitAsleep(t, c, 1)
	if err := waiter.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	noLockKeys(t, srv)
}

func TestSleepingFixedLeaseIsLostAtItsDeadline(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{})
	const lease = 2500 * time.Millisecond
	l := c.Lock(context.Background(), "fixed", holdfast.WithLease(lease))
	mustAcquire(t, l)
	deadline := l.Deadline()
	waitAsleep(t, c, 1)
	<-l.Lost
	lost := time.Now()
	if !errors.Is(l.Err(), holdfast.ErrLeaseExpired) {
		t.Fatalf("ended with %v", l.Err())
	}
	if lost.Before(deadline.Add(-100 * time.Millisecond)) {
		t.Fatalf("Lost %v before its deadline", deadline.Sub(lost))
	}
	// Lost came before Redis could give the lock to anyone: the key still
	// lives (the deadline is drift earlier than the key's expiry) or has
	// just expired, never earlier than the deadline.
	t.Logf("lost %v after the deadline", lost.Sub(deadline))
}

func TestCloseReleasesSleepingLocks(t *testing.T) {
	srv := redistest.Start(t)
	c, err := holdfast.New(holdfast.Config{Redis: srv.Client(t), WatchdogTimeout: 900 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"s1", "s2", "s3"}
	var locks []*holdfast.Lock
	for _, n := range names {
		l := c.Lock(context.Background(), n)
		mustAcquire(t, l)
		locks = append(locks, l)
	}
	waitAsleep(t, c, len(names))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, l := range locks {
		mustLose(t, l, holdfast.ErrClosed)
	}
	noLockKeys(t, srv)
}

func TestSleepingLockWakesOnAFailedRenewalAndSleepsAgain(t *testing.T) {
	srv := redistest.Start(t)
	const lease = 1500 * time.Millisecond // renewed every 500ms
	c := newClient(t, srv, holdfast.Config{WatchdogTimeout: lease, CallTimeout: 200 * time.Millisecond})
	l := c.Lock(context.Background(), "sleeper")
	mustAcquire(t, l)
	waitAsleep(t, c, 1)
	// Writes refused for 600ms: the record's renewal due in that time
	// fails, which takes the machine; it tries again until one succeeds.
	srv.Do(t, "CLIENT", "PAUSE", "600", "WRITE")
	time.Sleep(700 * time.Millisecond)
	notLost(t, l)
	waitAsleep(t, c, 1)
	notLost(t, l)
	if left := pttl(t, srv, "sleeper"); left <= lease/2 {
		t.Fatalf("PTTL %v after the pause: the renewals did not resume", left)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	noLockKeys(t, srv)
}

func TestSleepingLockIsLostWhenRedisIsGone(t *testing.T) {
	srv := redistest.Start(t)
	const lease = 900 * time.Millisecond
	c := newClient(t, srv, holdfast.Config{WatchdogTimeout: lease, CallTimeout: 300 * time.Millisecond})
	l := c.Lock(context.Background(), "sleeper")
	mustAcquire(t, l)
	waitAsleep(t, c, 1)
	srv.Kill()
	killed := time.Now()
	mustLose(t, l, holdfast.ErrLeaseExpired)
	// Told by the validity deadline (a lease after the last renewal at
	// most), before Redis could have given the key to anyone.
	if took := time.Since(killed); took > lease+200*time.Millisecond {
		t.Fatalf("Lost %v after Redis went away, more than a lease", took)
	}
	if dl := l.Deadline(); time.Now().Before(dl.Add(-50 * time.Millisecond)) {
		t.Fatalf("Lost %v before its deadline", time.Until(dl))
	}
}

// TestSleepAndWakeUnderContention runs many goroutines of two Clients on a
// few names with a 5 ms linger, so that holds fall asleep and wake all the
// time while others wait, reenter, release and cancel: mutual exclusion and
// increasing tokens hold, every Lock ends, nothing is left in Redis.
func TestSleepAndWakeUnderContention(t *testing.T) {
	defer holdfast.SetIdleTimeout(5 * time.Millisecond)()
	srv := redistest.Start(t)
	const lease = 300 * time.Millisecond // renewed every 100ms
	clients := []*holdfast.Client{
		newClient(t, srv, holdfast.Config{WatchdogTimeout: lease}),
		newClient(t, srv, holdfast.Config{WatchdogTimeout: lease}),
	}
	names := []string{"s0", "s1", "s2"}
	var mu sync.Mutex
	// name -> the Lock holding it now and its context, whose end releases it
	type hold struct {
		l   *holdfast.Lock
		ctx context.Context
	}
	holder := map[string]hold{}
	lastToken := map[string]uint64{} // name -> last token granted
	var sleeps atomic.Int64
	stop := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for g := 0; g < 12; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			c := clients[g%len(clients)]
			me := fmt.Sprintf("g%d", g)
			for time.Now().Before(stop) {
				name := names[rng.Intn(len(names))]
				octx := holdfast.WithOwner(context.Background(), me)
				ctx, cancel := context.WithTimeout(octx, time.Duration(50+rng.Intn(400))*time.Millisecond)
				l := c.Lock(ctx, name)
				select {
				case <-l.Acquired:
				case <-l.Lost:
					cancel()
					continue
				}
				mu.Lock()
				if h := holder[name]; h.l != nil {
					select {
					case <-h.l.Lost: // lost (told before anyone else got it)
					case <-h.ctx.Done(): // its context's end released it
					default:
						t.Errorf("%s granted %s while another Lock holds it", me, name)
					}
				}
				if tok := l.Token(); tok <= lastToken[name] {
					t.Errorf("%s: token %d after %d", name, tok, lastToken[name])
				} else {
					lastToken[name] = tok
				}
				holder[name] = hold{l, ctx}
				mu.Unlock()
				// Hold a while: often past the linger, so the hold sleeps.
				time.Sleep(time.Duration(rng.Intn(40)) * time.Millisecond)
				if n := holdfast.Sleeping(c); n > 0 {
					sleeps.Add(1)
				}
				if rng.Intn(3) == 0 {
					// Reenter (the same owner), waking the hold if it sleeps.
					again := c.Lock(octx, name)
					select {
					case <-again.Acquired:
						// A reentry shares the hold's token; a fresh grant
						// (another token) comes only after the hold ended
						// (its context), and the hold is told first.
						if again.Token() != l.Token() {
							select {
							case <-l.Lost:
							default:
								t.Errorf("reentry token %d while the hold (token %d) lives", again.Token(), l.Token())
							}
						}
						if err := again.Release(context.Background()); err != nil {
							t.Errorf("reentry Release: %v", err)
						}
					case <-again.Lost:
						// The hold ended meanwhile (its context), and the
						// reentry gave up or found the lock taken: fine.
					case <-time.After(waitFor):
						t.Errorf("%s: reentry neither granted nor ended", name)
						cancel()
						return
					}
					again.Release(context.Background())
				}
				mu.Lock()
				holder[name] = hold{}
				mu.Unlock()
				if rng.Intn(4) == 0 {
					cancel() // the context's end releases it
					<-l.Lost
				} else if err := l.Release(context.Background()); err != nil && !errors.Is(err, holdfast.ErrNotHeld) {
					t.Errorf("Release: %v", err)
				}
				cancel()
				select {
				case <-l.Lost:
				case <-time.After(waitFor):
					t.Errorf("%s: Lost not closed after the release", name)
					return
				}
			}
		}()
	}
	wg.Wait()
	if sleeps.Load() == 0 {
		t.Fatal("no hold was seen asleep: the test did not test sleeping")
	}
	t.Logf("holds seen with a lock asleep: %d", sleeps.Load())
	noLockKeys(t, srv)
	deadline := time.Now().Add(waitFor)
	for _, c := range clients {
		for (c.Actors() > 0 || holdfast.Sleeping(c) > 0) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if c.Actors() > 0 || holdfast.Sleeping(c) > 0 {
			t.Fatalf("%d actors and %d sleeping locks left after every Lock ended", c.Actors(), holdfast.Sleeping(c))
		}
	}
}

// TestLateReleaseMeetsNoStoppedActor sends a Release letter to a Lock
// whose hold ended and whose actor then passivated: the Release that
// checked Lost a moment before the hold was lost (its lease ran out on a
// loaded machine) and sent after the actor's linger was over. The letter
// must be dropped, not sent to the stopped actor: that was the dead letter
// TestNoLetterMeetsAStoppedActor met under load in CI.
func TestLateReleaseMeetsNoStoppedActor(t *testing.T) {
	srv := redistest.Start(t)
	defer holdfast.SetIdleTimeout(time.Millisecond)()
	c := newClient(t, srv, holdfast.Config{})
	l := c.Lock(context.Background(), "late-release")
	mustAcquire(t, l)
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.Actors() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if c.Actors() > 0 {
		t.Fatal("the released lock's actor did not passivate")
	}
	before := holdfast.DeadLetters()
	holdfast.SendRelease(l)
	if err := l.Release(context.Background()); !errors.Is(err, holdfast.ErrNotHeld) {
		t.Fatalf("second Release: %v, want ErrNotHeld", err)
	}
	// protoactor counts a dead letter on the sender's goroutine, but give
	// its event stream a moment all the same.
	time.Sleep(50 * time.Millisecond)
	if d := holdfast.DeadLetters() - before; d != 0 {
		t.Fatalf("%d letters reached the stopped actor", d)
	}
}

// TestNoLetterMeetsAStoppedActor holds many watchdog locks whose renewal
// period equals the linger, so that the turn of a renewal's reply often
// finds the linger over just as the linger timer fires, and closes the
// Client while the released actors linger: an actor must not sleep or
// passivate with its linger timer's letter on its way, which would reach
// it stopped as a dead letter. (Before the fix, under the race detector as
// CI runs it: 16 and 27 dead letters in 2 runs of 4; protoactor's
// dead-letter throttle then outlived the test.)
func TestNoLetterMeetsAStoppedActor(t *testing.T) {
	srv := redistest.Start(t)
	defer holdfast.SetIdleTimeout(50 * time.Millisecond)()
	c := newClient(t, srv, holdfast.Config{WatchdogTimeout: 150 * time.Millisecond})
	before := holdfast.DeadLetters()
	const n = 2000
	locks := make([]*holdfast.Lock, n)
	parallelN(32, n, func(j int) {
		locks[j] = c.Lock(context.Background(), fmt.Sprintf("dl-%d", j))
		if err := locks[j].Wait(context.Background()); err != nil {
			t.Error(err)
		}
	})
	time.Sleep(time.Second) // about 20 renewals and sleeps of each hold
	parallelN(32, n, func(j int) {
		// On a loaded machine (CI, the race detector) some of these short
		// leases run out before their renewal: the hold then says so,
		// from its deadline or from Redis.
		err := locks[j].Release(context.Background())
		if err != nil && !errors.Is(err, holdfast.ErrLeaseExpired) && !errors.Is(err, holdfast.ErrNotOwner) {
			t.Error(err)
		}
	})
	// Close while the released actors linger, many of them passivating
	// at Close just as their linger timers fire; a timer's letter sent to
	// an actor that stopped would arrive after Close returned.
	c.Close()
	time.Sleep(300 * time.Millisecond)
	if d := holdfast.DeadLetters() - before; d != 0 {
		t.Fatalf("%d letters reached stopped actors", d)
	}
	if s := holdfast.Sleeping(c); s != 0 {
		t.Fatalf("%d records asleep after Close", s)
	}
}

// A LockAll's parts sleep like plain holds: the composite's part handle
// gives its owner field back, so the records keep none. Asleep, the parts
// keep their leases, and Release wakes and releases them.
func TestLockAllPartsSleep(t *testing.T) {
	srv := redistest.Start(t)
	const lease = 900 * time.Millisecond
	c := newClient(t, srv, holdfast.Config{WatchdogTimeout: lease})
	l := holdfast.LockAll(context.Background(), []holdfast.Target{{Client: c, Name: "part-a"}, {Client: c, Name: "part-b"}})
	mustAcquire(t, l)
	waitAsleep(t, c, 2)
	time.Sleep(3 * lease) // only the records' renewals keep the parts
	notLost(t, l)
	for _, name := range []string{"part-a", "part-b"} {
		if left := pttl(t, srv, name); left <= 0 || left > lease {
			t.Fatalf("PTTL %v of sleeping part %s, want within the lease %v", left, name, lease)
		}
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release of a sleeping LockAll: %v", err)
	}
	noLockKeys(t, srv)
}

// Every kind's quiet hold sleeps, under either layout: a record keeps no
// request ID or owner field, so the hold sleeps only if its Lock gives both
// back exactly (a field of its own under WithOwner or the read-write kinds,
// the Client's anonymous one otherwise). Asleep for three leases, none is
// lost, and each releases.
func TestEveryKindSleeps(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	const lease = 900 * time.Millisecond
	for _, layout := range []holdfast.Layout{holdfast.LayoutHoldfast, holdfast.LayoutRedisson} {
		c := newClient(t, srv, holdfast.Config{WatchdogTimeout: lease, Layout: layout})
		cancellable, cancel := context.WithCancel(ctx)
		defer cancel()
		kinds := map[string]func(name string) *holdfast.Lock{
			"lock":        func(n string) *holdfast.Lock { return c.Lock(ctx, n) },
			"owner":       func(n string) *holdfast.Lock { return c.Lock(holdfast.WithOwner(ctx, "me"), n) },
			"cancellable": func(n string) *holdfast.Lock { return c.Lock(cancellable, n) },
			"read":        func(n string) *holdfast.Lock { return c.ReadLock(ctx, n) },
			"write":       func(n string) *holdfast.Lock { return c.WriteLock(ctx, n) },
			"owner-write": func(n string) *holdfast.Lock { return c.WriteLock(holdfast.WithOwner(ctx, "me"), n) },
			"fair":        func(n string) *holdfast.Lock { return c.FairLock(ctx, n) },
			"semaphore":   func(n string) *holdfast.Lock { return c.Semaphore(ctx, n, 2) },
			"election":    func(n string) *holdfast.Lock { return c.Elect(ctx, n, "v") },
			"fixed-lease": func(n string) *holdfast.Lock { return c.Lock(ctx, n, holdfast.WithLease(time.Hour)) },
		}
		if layout == holdfast.LayoutRedisson {
			delete(kinds, "semaphore")
			delete(kinds, "election")
		}
		locks := map[string]*holdfast.Lock{}
		for kind, lock := range kinds {
			l := lock(fmt.Sprintf("every-%d-%s", layout, kind))
			mustAcquire(t, l)
			locks[kind] = l
		}
		waitAsleep(t, c, len(locks))
		time.Sleep(3 * lease) // only the records' renewals keep them
		for kind, l := range locks {
			notLost(t, l)
			if err := l.Release(ctx); err != nil {
				t.Errorf("layout %d: Release of a sleeping %s hold: %v", layout, kind, err)
			}
		}
	}
}
