package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
)

// Semaphore tests on a real redis-server.

// TestSemaphoreAtMostPermits: two permits go to the first two holders of
// three Clients, the third waits until one is released and is then woken by
// the release (well before any lease could end), with a token above both.
func TestSemaphoreAtMostPermits(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	a, b, c := newClient(t, srv, holdfast.Config{}), newClient(t, srv, holdfast.Config{}), newClient(t, srv, holdfast.Config{})
	la, lb := a.Semaphore(ctx, "provider", 2), b.Semaphore(ctx, "provider", 2)
	mustAcquire(t, la)
	mustAcquire(t, lb)
	lc := c.Semaphore(ctx, "provider", 2)
	if heldWithin(lc, 300*time.Millisecond) {
		t.Fatal("a third holder was granted beside two on a semaphore of 2 permits")
	}
	released := time.Now()
	if err := lb.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	mustAcquire(t, lc)
	// The watchdog's lease is 30 s: only the release's announcement can
	// have woken the waiter this soon.
	if waited := time.Since(released); waited > 5*time.Second {
		t.Fatalf("waiter granted %v after the release", waited)
	}
	if lc.Token() <= la.Token() || lc.Token() <= lb.Token() {
		t.Fatalf("tokens %d, %d then %d: not increasing", la.Token(), lb.Token(), lc.Token())
	}
	notLost(t, la)
	info, err := a.Inspect(ctx, "provider")
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != holdfast.KindSemaphore || info.Permits != 2 || len(info.Holders) != 2 || info.TTL <= 0 {
		t.Fatalf("Inspect = %+v, want a semaphore of 2 permits with 2 holders", info)
	}
	la.Release(ctx)
	lc.Release(ctx)
	noLockKeys(t, srv)
}

// TestSemaphoreReentryKeepsOnePermit: an owner taking its permit again
// counts up on the same permit; another owner still gets the second one.
func TestSemaphoreReentryKeepsOnePermit(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{})
	ctx := holdfast.WithOwner(context.Background(), "job-7")
	first := c.Semaphore(ctx, "exports", 2)
	mustAcquire(t, first)
	again := c.Semaphore(ctx, "exports", 2)
	mustAcquire(t, again)
	if again.Token() != first.Token() {
		t.Fatalf("reentry token %d, the permit's is %d", again.Token(), first.Token())
	}
	other := newClient(t, srv, holdfast.Config{}).Semaphore(context.Background(), "exports", 2)
	mustAcquire(t, other)
	info, err := c.Inspect(context.Background(), "exports")
	if err != nil {
		t.Fatal(err)
	}
	counts := map[int64]int{}
	for _, h := range info.Holders {
		counts[h.Count]++
	}
	if len(info.Holders) != 2 || counts[2] != 1 || counts[1] != 1 {
		t.Fatalf("holders %+v, want one permit held twice and one once", info.Holders)
	}
	third := newClient(t, srv, holdfast.Config{}).Semaphore(context.Background(), "exports", 2, holdfast.WithWait(0))
	mustLose(t, third, holdfast.ErrWaitTimeout)
	again.Release(ctx)
	notLost(t, first)
	first.Release(ctx)
	other.Release(context.Background())
	noLockKeys(t, srv)
}

// TestSemaphoreBadInput: a count that disagrees with the holders', a count
// below 1 and another kind on the name each end at once and change nothing.
func TestSemaphoreBadInput(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	a, b := newClient(t, srv, holdfast.Config{}), newClient(t, srv, holdfast.Config{})
	held := a.Semaphore(ctx, "pool", 3)
	mustAcquire(t, held)
	before, err := a.Inspect(ctx, "pool")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		l    *holdfast.Lock
		want error
	}{
		{"another count, another client", b.Semaphore(ctx, "pool", 4), holdfast.ErrPermits},
		{"another count, same client", a.Semaphore(ctx, "pool", 2), holdfast.ErrPermits},
		{"zero permits", b.Semaphore(ctx, "pool", 0), holdfast.ErrInvalidOption},
		{"negative permits", b.Semaphore(ctx, "pool", -1), holdfast.ErrInvalidOption},
		{"a Lock on a semaphore", b.Lock(ctx, "pool"), holdfast.ErrWrongKind},
		{"a FairLock on a semaphore", b.FairLock(ctx, "pool"), holdfast.ErrWrongKind},
		{"a ReadLock on a semaphore", b.ReadLock(ctx, "pool"), holdfast.ErrWrongKind},
		{"an empty name", b.Semaphore(ctx, "", 3), holdfast.ErrInvalidName},
	} {
		select {
		case <-tc.l.Lost:
		case <-time.After(waitFor):
			t.Fatalf("%s: not ended", tc.name)
		}
		if !errors.Is(tc.l.Err(), tc.want) {
			t.Fatalf("%s: ended with %v, want %v", tc.name, tc.l.Err(), tc.want)
		}
	}
	after, err := a.Inspect(ctx, "pool")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(before.Holders, before.Permits, before.Kind) != fmt.Sprint(after.Holders, after.Permits, after.Kind) {
		t.Fatalf("refused calls changed the semaphore: %+v, then %+v", before, after)
	}
	lock := b.Lock(ctx, "plain")
	mustAcquire(t, lock)
	if l := a.Semaphore(ctx, "plain", 2); !errors.Is(l.Wait(ctx), holdfast.ErrWrongKind) {
		t.Fatalf("Semaphore on a Lock's name: %v, want ErrWrongKind", l.Err())
	}
	lock.Release(ctx)
	held.Release(ctx)
	// Free again: a new count takes.
	l := b.Semaphore(ctx, "pool", 5)
	mustAcquire(t, l)
	if info, _ := b.Inspect(ctx, "pool"); info.Permits != 5 {
		t.Fatalf("Permits = %d after the name was free and asked with 5", info.Permits)
	}
	l.Release(ctx)
}

// TestSemaphoreForceUnlock: ForceUnlock frees every permit, raises the fence
// and wakes the waiters; the old holders are Lost at their next renewal.
func TestSemaphoreForceUnlock(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	cfg := holdfast.Config{WatchdogTimeout: 600 * time.Millisecond}
	a, b := newClient(t, srv, cfg), newClient(t, srv, cfg)
	h1, h2 := a.Semaphore(ctx, "batch", 2), a.Semaphore(ctx, "batch", 2)
	mustAcquire(t, h1)
	mustAcquire(t, h2)
	w := b.Semaphore(ctx, "batch", 2)
	if heldWithin(w, 200*time.Millisecond) {
		t.Fatal("granted beside two permits")
	}
	if err := b.ForceUnlock(ctx, "batch"); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, w)
	if w.Token() <= max(h1.Token(), h2.Token()) {
		t.Fatalf("token %d after ForceUnlock not above the old holders' %d, %d", w.Token(), h1.Token(), h2.Token())
	}
	mustLose(t, h1, holdfast.ErrNotOwner)
	mustLose(t, h2, holdfast.ErrNotOwner)
	names, err := b.Names(ctx, "")
	if err != nil || len(names) != 1 || names[0] != "batch" {
		t.Fatalf("Names = %v, %v; want [batch]", names, err)
	}
	w.Release(ctx)
	noLockKeys(t, srv)
}

// TestSemaphoreReleaseWakesFewAttempts: with 20 waiters in 4 Clients on 2
// permits, one release costs a small constant number of script calls: one
// attempt per waiting process, not one per waiter.
func TestSemaphoreReleaseWakesFewAttempts(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	holder := newClient(t, srv, holdfast.Config{})
	h1, h2 := holder.Semaphore(ctx, "hot", 2), holder.Semaphore(ctx, "hot", 2)
	mustAcquire(t, h1)
	mustAcquire(t, h2)
	var waiters []*holdfast.Lock
	for range 4 {
		c := newClient(t, srv, holdfast.Config{})
		for range 5 {
			waiters = append(waiters, c.Semaphore(ctx, "hot", 2))
		}
	}
	// Every waiting Client has tried and sleeps (subscribed).
	deadline := time.Now().Add(waitFor)
	for numsub(t, srv, scripts.Channel("hot")) < 4 {
		if time.Now().After(deadline) {
			t.Fatal("waiting Clients never subscribed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	scriptCalls := func() int64 { return calls(t, srv, "evalsha") + calls(t, srv, "eval") }
	before := settled(scriptCalls) // each Client's attempt after its subscription is in
	h1.Release(ctx)
	granted := 0
	deadline = time.Now().Add(waitFor)
	for granted == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no waiter granted after a release")
		}
		time.Sleep(5 * time.Millisecond)
		for _, l := range waiters {
			if isClosed(l.Acquired) {
				granted++
			}
		}
	}
	used := settled(scriptCalls) - before // every woken process has tried
	// The release itself, one attempt per waiting Client (4), and one more
	// per Client at most (the granted Client's next waiter tries too): a
	// bound that does not grow with the waiters per Client.
	if used > 10 {
		t.Fatalf("one release cost %d script calls with 20 waiters in 4 Clients", used)
	}
	if granted != 1 {
		t.Fatalf("%d waiters granted after one permit freed", granted)
	}
	t.Logf("one release: %d script calls", used)
	h2.Release(ctx)
	var wg sync.WaitGroup
	for _, l := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Wait(ctx); err == nil {
				l.Release(ctx)
			}
		}()
	}
	wg.Wait()
}

// settled polls count until it has not moved for 150 ms, and returns it.
func settled(count func() int64) int64 {
	last, since := count(), time.Now()
	for time.Since(since) < 150*time.Millisecond {
		time.Sleep(10 * time.Millisecond)
		if n := count(); n != last {
			last, since = n, time.Now()
		}
	}
	return last
}

func numsub(t testing.TB, srv *redistest.Server, ch string) int64 {
	t.Helper()
	arr, err := srv.Do(t, "PUBSUB", "NUMSUB", ch).ToArray()
	if err != nil || len(arr) != 2 {
		t.Fatalf("PUBSUB NUMSUB: %v", err)
	}
	n, _ := arr[1].AsInt64()
	return n
}

// TestSemaphoreHoldersNeverExceedPermits: Clients cycling on a semaphore of
// 3 permits for a while; a shared counter of holders inside the critical
// section never passes 3, and tokens are unique.
func TestSemaphoreHoldersNeverExceedPermits(t *testing.T) {
	srv := redistest.Start(t)
	var inside, most atomic.Int64
	var mu sync.Mutex
	tokens := map[uint64]bool{}
	var wg sync.WaitGroup
	stop := time.Now().Add(1500 * time.Millisecond)
	for range 4 {
		c := newClient(t, srv, holdfast.Config{})
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				for time.Now().Before(stop) {
					l := c.Semaphore(ctx, "cap", 3)
					if err := l.Wait(ctx); err != nil {
						t.Errorf("Wait: %v", err)
						return
					}
					n := inside.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					mu.Lock()
					if tokens[l.Token()] {
						t.Errorf("token %d granted twice", l.Token())
					}
					tokens[l.Token()] = true
					mu.Unlock()
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					if err := l.Release(ctx); err != nil {
						t.Errorf("Release: %v", err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if most.Load() > 3 {
		t.Fatalf("%d holders at once on 3 permits", most.Load())
	}
	if most.Load() < 2 {
		t.Fatalf("at most %d holder at once: the permits were never shared", most.Load())
	}
	t.Logf("%d grants, at most %d holders at once", len(tokens), most.Load())
	noLockKeys(t, srv)
}

// semChildMode makes the child process a semaphore holder (see runSemChild).
const semChildMode = "HOLDFAST_TEST_CHILD_SEM"

// runSemChild takes the only permit of "sem-crash" with a 1s watchdog lease,
// prints "held" and holds until it is killed.
func runSemChild() {
	c := childClient(holdfast.Config{ClientID: "child", WatchdogTimeout: time.Second})
	holdUntilKilled(c.Semaphore(context.Background(), "sem-crash", 2))
}

// TestSemaphoreKilledHolderFreesItsPermit: a holder process killed with
// SIGKILL leaves its permit, which frees at its own lease's end (1 s) while
// a live holder keeps renewing the other permit.
func TestSemaphoreKilledHolderFreesItsPermit(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	live := newClient(t, srv, holdfast.Config{WatchdogTimeout: time.Second})
	keep := live.Semaphore(ctx, "sem-crash", 2)
	mustAcquire(t, keep)
	cmd := startChild(t, "held", childEnv+"="+srv.Addr, semChildMode+"=1")
	w := newClient(t, srv, holdfast.Config{}).Semaphore(ctx, "sem-crash", 2)
	if heldWithin(w, 300*time.Millisecond) {
		t.Fatal("granted while both permits are held")
	}
	killed := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, w)
	if waited := time.Since(killed); waited > 3*time.Second {
		t.Fatalf("the dead holder's permit freed %v after the kill; its lease is 1s", waited)
	}
	notLost(t, keep)
	w.Release(ctx)
	keep.Release(ctx)
}
