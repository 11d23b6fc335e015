package holdfast_test

import (
	"context"
	"encoding/hex"
	"errors"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redissontest"
	"github.com/holdfast/holdfast/internal/redistest"
)

// The semaphore under the Redisson layout against the test client's
// RPermitExpirableSemaphore ("Java" below), on a real redis-server.

// leaseRecords returns the semaphore name's lease records: permit id (hex)
// -> the end of its lease as Redis stores the score.
func leaseRecords(t testing.TB, srv *redistest.Server, name string) map[string]string {
	t.Helper()
	vals, err := srv.Do(t, "ZRANGE", redissontest.SemTimeoutKey(name), "0", "-1", "WITHSCORES").ToArray()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, v := range vals { // RESP3: one [member, score] pair each
		pair, err := v.AsStrSlice()
		if err != nil || len(pair) != 2 {
			t.Fatalf("ZRANGE WITHSCORES entry %v: %v", v, err)
		}
		out[hex.EncodeToString([]byte(pair[0]))] = pair[1]
	}
	return out
}

// freePermits is GET NAME, -1 when absent.
func freePermits(t testing.TB, srv *redistest.Server, name string) int64 {
	t.Helper()
	n, err := srv.Do(t, "GET", name).AsInt64()
	if rueidis.IsRedisNil(err) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRedissonSemKeys: a Go permit is a Redisson permit: NAME counts one
// free permit less, {NAME}:timeout holds a 16-byte id scored with the end
// of its lease in whole milliseconds; a reentry keeps the one permit; the
// final release gives it back and publishes the new free count on
// redisson_sc:{NAME}. Token is 0; Inspect shows the permit.
func TestRedissonSemKeys(t *testing.T) {
	srv := redistest.Start(t)
	java := javaClient(t, srv, "3b0f7c1e-5d4a-4c2b-8e9f-0a1b2c3d4e5f")
	c := redissonClient(t, srv, holdfast.Config{})
	ctx := holdfast.WithOwner(context.Background(), "exporter")
	if ok, err := java.TrySetPermits(ctx, "jobs", 3); !ok || err != nil {
		t.Fatalf("trySetPermits: %v, %v", ok, err)
	}
	before := time.Now()
	l := c.Semaphore(ctx, "jobs", 3)
	mustAcquire(t, l)
	again := c.Semaphore(ctx, "jobs", 3)
	mustAcquire(t, again)
	if n := freePermits(t, srv, "jobs"); n != 2 {
		t.Fatalf("free permits %d, want 2", n)
	}
	if n, err := java.AvailablePermits(ctx, "jobs"); n != 2 || err != nil {
		t.Fatalf("Java availablePermits = %d, %v", n, err)
	}
	recs := leaseRecords(t, srv, "jobs")
	if len(recs) != 1 {
		t.Fatalf("lease records %v, want one permit", recs)
	}
	var id string
	for k, score := range recs {
		id = k
		ends, err := strconv.ParseInt(score, 10, 64)
		if len(k) != 32 || err != nil {
			t.Fatalf("record %s scored %q: want a 16-byte id and an integer", k, score)
		}
		lease := time.UnixMilli(ends).Sub(before)
		if lease < 20*time.Second || lease > 40*time.Second {
			t.Fatalf("lease record ends %v after the call, want the 30s watchdog lease", lease)
		}
	}
	if l.Token() != 0 || again.Token() != 0 {
		t.Fatalf("tokens %d, %d: a Redisson permit has none", l.Token(), again.Token())
	}
	info, err := c.Inspect(ctx, "jobs")
	if err != nil || info.Kind != holdfast.KindSemaphore || info.Permits != 3 || len(info.Holders) != 1 ||
		info.Holders[0].Owner != id || info.TTL <= 0 {
		t.Fatalf("Inspect = %+v, %v; want the semaphore of 3 held by %s", info, err, id)
	}

	// A name holding '{' keeps its records at NAME:timeout.
	braced := c.Semaphore(ctx, "{team}jobs", 2)
	mustAcquire(t, braced)
	if names, err := c.Names(ctx, "*jobs"); err != nil || len(names) != 2 || names[0] != "jobs" || names[1] != "{team}jobs" {
		t.Fatalf("Names = %v, %v; want the two semaphores held", names, err)
	}
	braced.Release(ctx)
	if names, err := c.Names(ctx, ""); err != nil || len(names) != 1 || names[0] != "jobs" {
		t.Fatalf("Names after a release = %v, %v; want jobs alone", names, err)
	}

	msgs := subscribeMessages(t, srv, redissontest.SemChannel("jobs"))
	if err := again.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := freePermits(t, srv, "jobs"); n != 2 || len(leaseRecords(t, srv, "jobs")) != 1 {
		t.Fatal("the inner release gave the permit back")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-msgs:
		if m != "3" {
			t.Fatalf("release published %q, want the free count 3", m)
		}
	case <-time.After(waitFor):
		t.Fatal("the release published nothing")
	}
	if n := freePermits(t, srv, "jobs"); n != 3 || len(leaseRecords(t, srv, "jobs")) != 0 {
		t.Fatalf("after the release: %d free, records %v", n, leaseRecords(t, srv, "jobs"))
	}
}

// subscribeMessages subscribes to ch and returns its messages.
func subscribeMessages(t testing.TB, srv *redistest.Server, ch string) <-chan string {
	t.Helper()
	sub := srv.Client(t)
	msgs := make(chan string, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sub.Receive(ctx, sub.B().Subscribe().Channel(ch).Build(), func(m rueidis.PubSubMessage) {
			select {
			case msgs <- m.Message:
			default:
			}
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	waitChannel(t, srv, ch)
	return msgs
}

// TestRedissonSemPermits: a Go Semaphore on a new name sets its size as
// trySetPermits does (Java then finds it set); a count other than the one
// Redis keeps ends with ErrPermits and changes nothing.
func TestRedissonSemPermits(t *testing.T) {
	srv := redistest.Start(t)
	java := javaClient(t, srv, "c1d2e3f4-0000-4000-8000-000000000001")
	c := redissonClient(t, srv, holdfast.Config{})
	ctx := context.Background()

	l := c.Semaphore(ctx, "fresh", 4, holdfast.WithLease(time.Hour)) // no renewal between the dumps
	mustAcquire(t, l)
	if n := freePermits(t, srv, "fresh"); n != 3 {
		t.Fatalf("free permits %d, want 3 of 4", n)
	}
	if ok, err := java.TrySetPermits(ctx, "fresh", 9); ok || err != nil {
		t.Fatalf("Java trySetPermits on the Go-made semaphore: %v, %v", ok, err)
	}
	for _, tc := range []struct {
		name    string
		permits int
		want    string
	}{
		{"fresh", 5, "it has 4 permits"},
		{"set-by-java", 3, "it has 2 permits"},
	} {
		if tc.name == "set-by-java" {
			if ok, err := java.TrySetPermits(ctx, tc.name, 2); !ok || err != nil {
				t.Fatal(ok, err)
			}
		}
		keys := dumpKeys(t, srv)
		err := c.Semaphore(ctx, tc.name, tc.permits).Wait(ctx)
		if !errors.Is(err, holdfast.ErrPermits) {
			t.Fatalf("%s with %d permits: %v, want ErrPermits", tc.name, tc.permits, err)
		}
		if got := dumpKeys(t, srv); got != keys {
			t.Fatalf("the refusal changed Redis:\n%s\nthen\n%s", keys, got)
		}
	}
	l.Release(ctx)
}

// dumpKeys renders every key and its value, for "changed nothing" checks.
func dumpKeys(t testing.TB, srv *redistest.Server) string {
	t.Helper()
	out := ""
	for _, k := range srv.Keys(t) {
		d, err := srv.Do(t, "DUMP", k).ToString()
		if err != nil {
			t.Fatal(err)
		}
		out += k + "=" + hex.EncodeToString([]byte(d)) + "\n"
	}
	return out
}

// TestRedissonSemWrongKind: a Semaphore on a name whose keys are another
// kind's (an RLock, an RReadWriteLock, a string that is no count, lease
// records of another type) ends with ErrWrongKind and changes nothing, and
// so do Lock, ReadLock and WriteLock on a semaphore's name.
func TestRedissonSemWrongKind(t *testing.T) {
	srv := redistest.Start(t)
	java := javaClient(t, srv, "c1d2e3f4-0000-4000-8000-000000000002")
	c := redissonClient(t, srv, holdfast.Config{})
	ctx := context.Background()
	if err := java.Lock(ctx, "rlock", 1, -1); err != nil {
		t.Fatal(err)
	}
	if err := java.ReadLock(ctx, "rwlock", 1, -1); err != nil {
		t.Fatal(err)
	}
	srv.Do(t, "SET", "text", "hello")
	srv.Do(t, "SET", "odd", "2")
	srv.Do(t, "SET", redissontest.SemTimeoutKey("odd"), "x")
	for _, name := range []string{"rlock", "rwlock", "text", "odd"} {
		keys := dumpKeys(t, srv)
		if err := c.Semaphore(ctx, name, 2).Wait(ctx); !errors.Is(err, holdfast.ErrWrongKind) {
			t.Fatalf("Semaphore(%s): %v, want ErrWrongKind", name, err)
		}
		if got := dumpKeys(t, srv); got != keys {
			t.Fatalf("Semaphore(%s) changed Redis:\n%s\nthen\n%s", name, keys, got)
		}
	}
	// And the other way round: the other kinds on a semaphore's name.
	sem := c.Semaphore(ctx, "sem", 2, holdfast.WithLease(time.Hour)) // no renewal between the dumps
	mustAcquire(t, sem)
	keys := dumpKeys(t, srv)
	for kind, l := range map[string]*holdfast.Lock{
		"Lock": c.Lock(ctx, "sem"), "ReadLock": c.ReadLock(ctx, "sem"), "WriteLock": c.WriteLock(ctx, "sem"),
	} {
		if err := l.Wait(ctx); !errors.Is(err, holdfast.ErrWrongKind) {
			t.Fatalf("%s on a semaphore: %v, want ErrWrongKind", kind, err)
		}
	}
	if got := dumpKeys(t, srv); got != keys {
		t.Fatalf("other kinds on a semaphore changed Redis:\n%s\nthen\n%s", keys, got)
	}
	sem.Release(ctx)
}

// TestRedissonSemWakeBothWays: a Java permit taken without a lease keeps a
// Go waiter out until Java releases it, which wakes the Go waiter at once;
// then a Java waiter, which would otherwise wait for the Go permit's 30 s
// lease, is woken by the Go release.
func TestRedissonSemWakeBothWays(t *testing.T) {
	srv := redistest.Start(t)
	java := javaClient(t, srv, "c1d2e3f4-0000-4000-8000-000000000003")
	c := redissonClient(t, srv, holdfast.Config{})
	ctx := context.Background()
	if ok, err := java.TrySetPermits(ctx, "pool", 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	jid, err := java.AcquirePermit(ctx, "pool", -1)
	if err != nil {
		t.Fatal(err)
	}
	g := c.Semaphore(ctx, "pool", 1)
	if heldWithin(g, 300*time.Millisecond) {
		t.Fatal("Go granted while Java holds the only permit")
	}
	released := time.Now()
	if err := java.ReleasePermit(ctx, "pool", jid); err != nil {
		t.Fatal(err)
	}
	lat := grantedWithin(t, g, released, 5*time.Second)
	t.Logf("Go waiter granted %v after the Java release", lat)
	if _, ok, err := java.TryAcquirePermit(ctx, "pool", 200, 10000); ok || err != nil {
		t.Fatalf("Java tryAcquire while Go holds: %v, %v", ok, err)
	}

	got := make(chan time.Time, 1)
	var id string
	go func() {
		var err error
		id, err = java.AcquirePermit(ctx, "pool", 10000)
		if err != nil {
			t.Error(err)
		}
		got <- time.Now()
	}()
	waitChannel(t, srv, redissontest.SemChannel("pool"))
	time.Sleep(50 * time.Millisecond)
	released = time.Now()
	if err := g.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-got:
		t.Logf("Java waiter granted %v after the Go release", at.Sub(released))
		if at.Sub(released) > 5*time.Second {
			t.Fatal("Java waiter woken late")
		}
	case <-time.After(waitFor):
		t.Fatal("Java waiter never granted")
	}
	if err := java.ReleasePermit(ctx, "pool", id); err != nil {
		t.Fatal(err)
	}
}

// TestRedissonSemMixedLoad: two Go Clients and two Java clients, three
// goroutines or threads each, take and give back permits of one semaphore of
// 3 until hundreds of acquisitions are done; never more than 3 are inside,
// more than one often is, and both sides get in.
func TestRedissonSemMixedLoad(t *testing.T) {
	srv := redistest.Start(t)
	const permits, target = 3, 600
	var inside, most, grants, javaGrants atomic.Int64
	enter := func() {
		n := inside.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(500 * time.Microsecond)
		inside.Add(-1)
	}
	deadline := time.Now().Add(60 * time.Second)
	more := func() bool { return grants.Load() < target && time.Now().Before(deadline) }
	var wg sync.WaitGroup
	for i := range 2 {
		c := redissonClient(t, srv, holdfast.Config{})
		j := javaClient(t, srv, "java-sem-"+strconv.Itoa(i))
		for range 3 {
			wg.Add(2)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				for more() {
					l := c.Semaphore(ctx, "fleet", permits)
					if err := l.Wait(ctx); err != nil {
						t.Errorf("Go: %v", err)
						return
					}
					enter()
					grants.Add(1)
					if err := l.Release(ctx); err != nil {
						t.Errorf("Go release: %v", err)
						return
					}
				}
			}()
			go func() {
				defer wg.Done()
				ctx := context.Background()
				for more() {
					id, err := j.AcquirePermit(ctx, "fleet", 10000)
					if err != nil {
						t.Errorf("Java: %v", err)
						return
					}
					enter()
					grants.Add(1)
					javaGrants.Add(1)
					if err := j.ReleasePermit(ctx, "fleet", id); err != nil {
						t.Errorf("Java release: %v", err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	t.Logf("%d grants, %d to Java, at most %d inside", grants.Load(), javaGrants.Load(), most.Load())
	if most.Load() > permits {
		t.Fatalf("%d holders at once on %d permits", most.Load(), permits)
	}
	if grants.Load() < target {
		t.Fatalf("only %d grants in a minute", grants.Load())
	}
	if most.Load() < 2 || javaGrants.Load() == 0 || grants.Load() == javaGrants.Load() {
		t.Fatal("the permits were never shared, or one side never got in")
	}
	if n := freePermits(t, srv, "fleet"); n != permits || len(leaseRecords(t, srv, "fleet")) != 0 {
		t.Fatalf("after the load: %d free, records %v", n, leaseRecords(t, srv, "fleet"))
	}
}

// TestRedissonSemWatchdog: a Go permit outlives many of its 1 s leases
// while its holder lives (the watchdog moves its lease record's end), and
// Java cannot take it meanwhile.
func TestRedissonSemWatchdog(t *testing.T) {
	srv := redistest.Start(t)
	java := javaClient(t, srv, "c1d2e3f4-0000-4000-8000-000000000004")
	c := redissonClient(t, srv, holdfast.Config{WatchdogTimeout: time.Second})
	ctx := context.Background()
	g := c.Semaphore(ctx, "renewed", 1)
	mustAcquire(t, g)
	if _, ok, err := java.TryAcquirePermit(ctx, "renewed", 3500, 10000); ok || err != nil {
		t.Fatalf("Java tryAcquire over 3.5 leases of the Go holder: %v, %v", ok, err)
	}
	notLost(t, g)
	if err := g.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// redissonSemChildMode makes the child process a Redisson-layout semaphore
// holder (see runRedissonSemChild).
const redissonSemChildMode = "HOLDFAST_TEST_CHILD_REDISSON_SEM"

// runRedissonSemChild takes the only permit of "rsem-crash" under the
// Redisson layout with a 1s watchdog lease, prints "held" and holds until it
// is killed.
func runRedissonSemChild() {
	c := childClient(holdfast.Config{ClientID: "child", WatchdogTimeout: time.Second, Layout: holdfast.LayoutRedisson})
	holdUntilKilled(c.Semaphore(context.Background(), "rsem-crash", 1))
}

// TestRedissonSemKilledGoHolder: a Go holder process killed with SIGKILL
// leaves its permit, which a Java waiter takes at the end of its lease (1 s),
// as Redisson takes back any ended lease.
func TestRedissonSemKilledGoHolder(t *testing.T) {
	srv := redistest.Start(t)
	java := javaClient(t, srv, "c1d2e3f4-0000-4000-8000-000000000005")
	ctx := context.Background()
	cmd := startChild(t, "held", childEnv+"="+srv.Addr, redissonSemChildMode+"=1")
	if _, ok, err := java.TryAcquirePermit(ctx, "rsem-crash", 1500, 10000); ok || err != nil {
		t.Fatalf("Java tryAcquire while the Go holder lives: %v, %v", ok, err)
	}
	killed := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	id, ok, err := java.TryAcquirePermit(ctx, "rsem-crash", waitFor.Milliseconds(), 10000)
	if !ok || err != nil {
		t.Fatalf("Java never took the dead holder's permit: %v", err)
	}
	waited := time.Since(killed)
	t.Logf("Java took the dead Go holder's permit %v after the kill", waited)
	if waited > 3*time.Second {
		t.Fatalf("the dead holder's permit freed %v after the kill; its lease is 1s", waited)
	}
	if err := java.ReleasePermit(ctx, "rsem-crash", id); err != nil {
		t.Fatal(err)
	}
}

// init starts the child holder before TestMain, which runs the other
// children (process_test.go).
func init() {
	if os.Getenv(redissonSemChildMode) != "" {
		runRedissonSemChild()
	}
}

// TestRedissonSemForceUnlock: holdfast's ForceUnlock gives back a Java
// permit and wakes a Go waiter at once; a Go holder whose permit it gave
// back ends with Lost at its next renewal.
func TestRedissonSemForceUnlock(t *testing.T) {
	srv := redistest.Start(t)
	java := javaClient(t, srv, "c1d2e3f4-0000-4000-8000-000000000006")
	c := redissonClient(t, srv, holdfast.Config{WatchdogTimeout: time.Second})
	ctx := context.Background()
	if ok, err := java.TrySetPermits(ctx, "stuck", 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := java.AcquirePermit(ctx, "stuck", -1); err != nil {
		t.Fatal(err)
	}
	g := c.Semaphore(ctx, "stuck", 1)
	if heldWithin(g, 300*time.Millisecond) {
		t.Fatal("Go granted while Java holds the only permit")
	}
	freed := time.Now()
	if err := c.ForceUnlock(ctx, "stuck"); err != nil {
		t.Fatal(err)
	}
	t.Logf("Go waiter granted %v after ForceUnlock", grantedWithin(t, g, freed, 5*time.Second))
	if err := c.ForceUnlock(ctx, "stuck"); err != nil {
		t.Fatal(err)
	}
	mustLose(t, g, holdfast.ErrNotOwner)
	if n := freePermits(t, srv, "stuck"); n != 1 || len(leaseRecords(t, srv, "stuck")) != 0 {
		t.Fatalf("after ForceUnlock: %d free, records %v", n, leaseRecords(t, srv, "stuck"))
	}
}
