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
	"github.com/holdfast/holdfast/internal/redissontest"
	"github.com/holdfast/holdfast/internal/redistest"
)

// The fair lock under the Redisson layout against the test client's
// RFairLock ("Java"), on a real redis-server.

// waitLine waits until the fair line of name holds n waiters.
func waitLine(t testing.TB, srv *redistest.Server, name string, n int64) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		got, _ := srv.Do(t, "LLEN", redissontest.FairQueueKey(name)).AsInt64()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("line of %s holds %d waiters, want %d", name, got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRedissonFairMixedArrivalOrder: Go and Java waiters queue in one
// line behind a Java holder and are granted in the order they arrived,
// each release (Go's or Java's) waking the next waiter of either side in
// milliseconds; two of the Go waiters share a Client.
func TestRedissonFairMixedArrivalOrder(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	// Both sides give a waiter the same wait (Redisson's default
	// fairLockWaitTimeout, WaiterTimeout): a grant takes that much off the
	// deadlines behind it.
	java := javaClient(t, srv, "5b0c2c1e-7d1a-4c55-9a43-2f1e0d9c8b7a")
	cfg := holdfast.Config{WaiterTimeout: redissontest.DefaultFairLockWaitTimeout}
	c1 := redissonClient(t, srv, cfg)
	c2 := redissonClient(t, srv, cfg)
	const name = "exports"
	if err := java.FairLock(ctx, name, 1, -1); err != nil {
		t.Fatal(err)
	}

	const hold = 20 * time.Millisecond
	var mu sync.Mutex
	var order []string
	var handovers []time.Duration
	var releasedAt time.Time
	granted := func(who string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, who)
		handovers = append(handovers, time.Since(releasedAt))
	}
	released := func() {
		mu.Lock()
		releasedAt = time.Now()
		mu.Unlock()
	}
	var wg sync.WaitGroup
	goWaiter := func(c *holdfast.Client, who string) {
		l := c.FairLock(ctx, name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Wait(ctx); err != nil {
				t.Errorf("%s: %v", who, err)
				return
			}
			granted(who)
			time.Sleep(hold)
			released()
			if err := l.Release(ctx); err != nil {
				t.Errorf("%s release: %v", who, err)
			}
		}()
	}
	javaWaiter := func(thread int64, who string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := java.FairLock(ctx, name, thread, -1); err != nil {
				t.Errorf("%s: %v", who, err)
				return
			}
			granted(who)
			time.Sleep(hold)
			released()
			if err := java.FairUnlock(ctx, name, thread); err != nil {
				t.Errorf("%s unlock: %v", who, err)
			}
		}()
	}
	want := []string{"go1-a", "java-2", "go2", "go1-b", "java-3"}
	goWaiter(c1, "go1-a")
	waitLine(t, srv, name, 1)
	javaWaiter(2, "java-2")
	waitLine(t, srv, name, 2)
	goWaiter(c2, "go2")
	waitLine(t, srv, name, 3)
	goWaiter(c1, "go1-b")
	waitLine(t, srv, name, 4)
	javaWaiter(3, "java-3")
	waitLine(t, srv, name, 5)

	info, err := c1.Inspect(ctx, name)
	if err != nil || info.Kind != holdfast.KindFair || info.Waiters != 5 || len(info.Holders) != 1 {
		t.Fatalf("Inspect = %+v, %v; want a fair lock, one Java holder, 5 waiters", info, err)
	}
	released()
	if err := java.FairUnlock(ctx, name, 1); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("granted in order %v, want arrival order %v", order, want)
	}
	t.Logf("hand-overs after each release: %v", handovers)
	for i, d := range handovers {
		if d > 2*time.Second {
			t.Fatalf("%s granted %v after the release before it: not woken", order[i], d)
		}
	}
	for _, k := range []string{name, redissontest.FairQueueKey(name), redissontest.FairTimeoutKey(name)} {
		if n, _ := srv.Do(t, "EXISTS", k).AsInt64(); n != 0 {
			t.Fatalf("%s left behind", k)
		}
	}
}

// TestRedissonFairVanishedJavaWaiterSkipped: a Java waiter that queued and
// died is dropped at its deadline (the holder's lease left at its arrival
// plus its wait, Redisson's rule), and the Go waiter behind it is granted
// then, without anyone telling it.
func TestRedissonFairVanishedJavaWaiterSkipped(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	java := javaClient(t, srv, "0e6f4b1c-3a2d-4f5e-8b7c-6d5e4f3a2b1c", redissontest.WithFairLockWaitTimeout(time.Second))
	c := redissonClient(t, srv, holdfast.Config{})
	const name = "report"
	if err := java.FairLock(ctx, name, 1, 1000); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if ok, _, err := java.FairTryAcquire(ctx, name, 2, 0, -1); ok || err != nil {
		t.Fatalf("dead waiter's try: %v, %v", ok, err)
	}
	l := c.FairLock(ctx, name)
	waitLine(t, srv, name, 2)
	if err := java.FairUnlock(ctx, name, 1); err != nil {
		t.Fatal(err)
	}
	// The dead waiter's deadline: at most 1s of lease + 1s of wait.
	took := grantedWithin(t, l, start, 2*time.Second+waitFor)
	t.Logf("Go waiter granted %v after the dead Java waiter queued", took)
	if took < time.Second {
		t.Fatalf("granted after %v, before the dead waiter's deadline", took)
	}
	if n, _ := srv.Do(t, "ZSCORE", redissontest.FairTimeoutKey(name), redissontest.LockField(java.ID(), 2)).AsInt64(); n != 0 {
		t.Fatal("dead waiter still in the line")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRedissonFairGoWaiterKeepsAndLeaves: a Go waiter outlives Redisson's
// deadlines by refreshing its own while it waits, and one that gives up
// (WithWait) leaves no place behind.
func TestRedissonFairGoWaiterKeepsAndLeaves(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	java := javaClient(t, srv, "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d")
	c := redissonClient(t, srv, holdfast.Config{WaiterTimeout: 300 * time.Millisecond})
	const name = "batch"
	if err := java.FairLock(ctx, name, 1, -1); err != nil {
		t.Fatal(err)
	}
	quitter := c.FairLock(ctx, name, holdfast.WithWait(200*time.Millisecond))
	if err := quitter.Wait(ctx); !errors.Is(err, holdfast.ErrWaitTimeout) {
		t.Fatalf("waiter with WithWait: %v, want ErrWaitTimeout", err)
	}
	waitLine(t, srv, name, 0)
	if n, _ := srv.Do(t, "ZCARD", redissontest.FairTimeoutKey(name)).AsInt64(); n != 0 {
		t.Fatalf("%d deadlines left by a waiter that gave up", n)
	}

	l := c.FairLock(ctx, name)
	waitLine(t, srv, name, 1)
	// Many WaiterTimeouts: a place never refreshed would be dropped by a
	// Java waiter's look (it prunes dead heads).
	time.Sleep(time.Second)
	if ok, err := java.FairTryLock(ctx, name, 2, 100, -1); ok || err != nil {
		t.Fatalf("Java tryLock: %v, %v", ok, err)
	}
	if got, _ := srv.Do(t, "LINDEX", redissontest.FairQueueKey(name), "0").ToString(); got == "" {
		t.Fatal("Go waiter lost its place")
	}
	released := time.Now()
	if err := java.FairUnlock(ctx, name, 1); err != nil {
		t.Fatal(err)
	}
	t.Logf("granted %v after the Java unlock", grantedWithin(t, l, released, 2*time.Second))
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRedissonFairWrongKind: a FairLock on a name whose keys are another
// kind's (an RReadWriteLock's hash, a string) ends with ErrWrongKind and
// changes nothing.
func TestRedissonFairWrongKind(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	java := javaClient(t, srv, "1f2e3d4c-5b6a-4798-8a7b-6c5d4e3f2a1b")
	c := redissonClient(t, srv, holdfast.Config{})
	if err := java.ReadLock(ctx, "rw", 1, -1); err != nil {
		t.Fatal(err)
	}
	srv.Do(t, "SET", "str", "5")
	for _, name := range []string{"rw", "str"} {
		before, _ := srv.Do(t, "DUMP", name).ToString()
		for _, opts := range [][]holdfast.Option{nil, {holdfast.WithWait(0)}} {
			if err := c.FairLock(ctx, name, opts...).Wait(ctx); !errors.Is(err, holdfast.ErrWrongKind) {
				t.Fatalf("FairLock on %s: %v, want ErrWrongKind", name, err)
			}
		}
		after, _ := srv.Do(t, "DUMP", name).ToString()
		if before != after {
			t.Fatalf("%s changed", name)
		}
		for _, k := range []string{redissontest.FairQueueKey(name), redissontest.FairTimeoutKey(name)} {
			if n, _ := srv.Do(t, "EXISTS", k).AsInt64(); n != 0 {
				t.Fatalf("%s written", k)
			}
		}
	}
}

// TestRedissonFairKilledGoWaiterSkipped: a Go waiter process killed with
// SIGKILL at the head of the line stops refreshing its deadline and is
// dropped within its WaiterTimeout; the live waiter behind it is granted
// then, though the Java release told only the dead one.
func TestRedissonFairKilledGoWaiterSkipped(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	wt := time.Second
	java := javaClient(t, srv, "7c6b5a49-3827-4615-9c8b-7a6f5e4d3c2b", redissontest.WithFairLockWaitTimeout(wt))
	const name = "fair-crash"
	if err := java.FairLock(ctx, name, 1, -1); err != nil {
		t.Fatal(err)
	}
	cmd := startChild(t, "waiting", childEnv+"="+srv.Addr, fairChildMode+"=redisson")
	waitLine(t, srv, name, 1)
	live := redissonClient(t, srv, holdfast.Config{WaiterTimeout: wt}).FairLock(ctx, name)
	waitLine(t, srv, name, 2)
	time.Sleep(wt / 2) // the child keeps its place meanwhile
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := java.FairUnlock(ctx, name, 1); err != nil {
		t.Fatal(err)
	}
	took := grantedWithin(t, live, killed, waitFor)
	t.Logf("live waiter granted %v after the SIGKILL of the head (WaiterTimeout %v)", took, wt)
	if took > wt+wt/2 {
		t.Fatalf("granted %v after the kill, more than WaiterTimeout + margin", took)
	}
	if err := live.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitLine(t, srv, name, 0)
}

// TestRedissonFairMixedLoad: two Go Clients and two Java clients, three
// goroutines or threads each, cycle on one fair lock for two seconds:
// one holder at a time, and both sides served.
func TestRedissonFairMixedLoad(t *testing.T) {
	srv := redistest.Start(t)
	var inside, most, grants, javaGrants atomic.Int64
	enter := func() {
		n := inside.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(200 * time.Microsecond)
		inside.Add(-1)
	}
	stop := time.Now().Add(2 * time.Second)
	cfg := holdfast.Config{WaiterTimeout: redissontest.DefaultFairLockWaitTimeout}
	var wg sync.WaitGroup
	for i := range 2 {
		c := redissonClient(t, srv, cfg)
		j := javaClient(t, srv, "java-fair-"+string(rune('a'+i)))
		for g := range 3 {
			wg.Add(2)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				for time.Now().Before(stop) {
					l := c.FairLock(ctx, "mixed-fair")
					if err := l.Wait(ctx); err != nil {
						t.Errorf("Go: %v", err)
						return
					}
					enter()
					grants.Add(1)
					l.Release(ctx)
				}
			}()
			go func() {
				defer wg.Done()
				ctx := context.Background()
				thread := int64(g + 1)
				for time.Now().Before(stop) {
					if err := j.FairLock(ctx, "mixed-fair", thread, -1); err != nil {
						t.Errorf("Java: %v", err)
						return
					}
					enter()
					grants.Add(1)
					javaGrants.Add(1)
					if err := j.FairUnlock(ctx, "mixed-fair", thread); err != nil {
						t.Errorf("Java unlock: %v", err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d holders at once", most.Load())
	}
	if javaGrants.Load() == 0 || grants.Load() == javaGrants.Load() {
		t.Fatalf("grants: %d, of which Java %d: one side never got in", grants.Load(), javaGrants.Load())
	}
	t.Logf("%d grants, %d to Java", grants.Load(), javaGrants.Load())
	for _, k := range []string{"mixed-fair", redissontest.FairQueueKey("mixed-fair"), redissontest.FairTimeoutKey("mixed-fair")} {
		if n, _ := srv.Do(t, "EXISTS", k).AsInt64(); n != 0 {
			t.Fatalf("%s left behind", k)
		}
	}
}
