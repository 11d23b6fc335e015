package holdfast_test

import (
	"context"
	"errors"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redissontest"
	"github.com/holdfast/holdfast/internal/redistest"
)

// The Redisson layout against a Redisson protocol client written for the
// tests (internal/redissontest, "Java" below), on a real redis-server.

func redissonClient(t testing.TB, srv *redistest.Server, cfg holdfast.Config) *holdfast.Client {
	t.Helper()
	cfg.Layout = holdfast.LayoutRedisson
	return newClient(t, srv, cfg)
}

func javaClient(t testing.TB, srv *redistest.Server, id string, opts ...redissontest.Option) *redissontest.Client {
	t.Helper()
	j := redissontest.New(srv.Client(t), id, opts...)
	t.Cleanup(j.Close)
	return j
}

// grantedWithin reports how long l took to be granted, failing past limit.
func grantedWithin(t testing.TB, l *holdfast.Lock, since time.Time, limit time.Duration) time.Duration {
	t.Helper()
	select {
	case <-l.Acquired:
	case <-l.Lost:
		t.Fatalf("Lock ended: %v", l.Err())
	case <-time.After(limit):
		t.Fatalf("not granted within %v", limit)
	}
	return time.Since(since)
}

// TestRedissonLayoutKeys: a Go hold is Redisson's RLock: the hash named by
// the name, one ID:THREAD field with the reentry count, RFencedLock's
// counter for the token; a release that frees it deletes the hash and
// publishes 0 on Redisson's channel.
func TestRedissonLayoutKeys(t *testing.T) {
	srv := redistest.Start(t)
	c := redissonClient(t, srv, holdfast.Config{})
	ctx := holdfast.WithOwner(context.Background(), "job")
	l := c.Lock(ctx, "orders")
	mustAcquire(t, l)
	again := c.Lock(ctx, "orders")
	mustAcquire(t, again)
	fields, err := srv.Do(t, "HGETALL", "orders").AsStrMap()
	if err != nil || len(fields) != 1 {
		t.Fatalf("HGETALL orders = %v, %v", fields, err)
	}
	for f, n := range fields {
		if !regexp.MustCompile(`^[^:]+:[0-9]+$`).MatchString(f) || n != "2" {
			t.Fatalf("field %q = %q, want Redisson's ID:THREAD holding 2", f, n)
		}
	}
	if tok, _ := srv.Do(t, "GET", redissontest.TokenKey("orders")).AsInt64(); uint64(tok) != l.Token() {
		t.Fatalf("token %d, RFencedLock's counter %d", l.Token(), tok)
	}
	if pttl, _ := srv.Do(t, "PTTL", "orders").AsInt64(); pttl <= 0 {
		t.Fatalf("PTTL orders = %d", pttl)
	}
	sub := srv.Client(t)
	msgs := make(chan string, 4)
	go sub.Receive(context.Background(), sub.B().Subscribe().Channel(redissontest.LockChannel("orders")).Build(),
		func(m rueidis.PubSubMessage) { msgs <- m.Message })
	waitChannel(t, srv, redissontest.LockChannel("orders"))
	again.Release(context.Background())
	select {
	case m := <-msgs:
		t.Fatalf("a reentry's release published %q", m)
	case <-time.After(100 * time.Millisecond):
	}
	l.Release(context.Background())
	select {
	case m := <-msgs:
		if m != "0" {
			t.Fatalf("release published %q, want Redisson's unlock message 0", m)
		}
	case <-time.After(waitFor):
		t.Fatal("no unlock message")
	}
	if n, _ := srv.Do(t, "EXISTS", "orders").AsInt64(); n != 0 {
		t.Fatal("hash left after the release")
	}
}

func waitChannel(t testing.TB, srv *redistest.Server, ch string) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for numsub(t, srv, ch) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("nobody subscribed to %s", ch)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRedissonExcludeAndWakeBothWays: a Java holder keeps a Go waiter out
// and its unlock wakes it at once (not at the 30 s TTL); then the other way
// round. Neither side's unlock touches the other's hold. Tokens increase
// across the sides.
func TestRedissonExcludeAndWakeBothWays(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	java := javaClient(t, srv, "8d1c4c6b-0a4e-4f0e-9c6e-1f2a3b4c5d6e")
	c := redissonClient(t, srv, holdfast.Config{})

	jt1, err := java.LockFenced(ctx, "ledger", 1, -1) // watchdog
	if err != nil {
		t.Fatal(err)
	}
	g := c.Lock(ctx, "ledger")
	if heldWithin(g, 300*time.Millisecond) {
		t.Fatal("Go granted while Java holds")
	}
	released := time.Now()
	if err := java.Unlock(ctx, "ledger", 1); err != nil {
		t.Fatal(err)
	}
	lat := grantedWithin(t, g, released, 5*time.Second)
	t.Logf("Go waiter granted %v after the Java unlock", lat)
	if g.Token() <= uint64(jt1) {
		t.Fatalf("Go token %d not above Java's %d", g.Token(), jt1)
	}
	// Java cannot unlock the Go hold, nor take it.
	var ime *redissontest.IllegalMonitorStateError
	if err := java.Unlock(ctx, "ledger", 1); !errors.As(err, &ime) {
		t.Fatalf("Java unlock of a Go hold: %v, want IllegalMonitorStateException", err)
	}
	if ok, err := java.TryLock(ctx, "ledger", 2, 200, -1); ok || err != nil {
		t.Fatalf("Java TryLock while Go holds: %v, %v", ok, err)
	}
	notLost(t, g)

	got := make(chan time.Time, 1)
	var jt2 int64
	go func() {
		tok, err := java.LockFenced(ctx, "ledger", 3, -1)
		if err != nil {
			t.Error(err)
		}
		jt2 = tok
		got <- time.Now()
	}()
	waitChannel(t, srv, redissontest.LockChannel("ledger"))
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
	if uint64(jt2) <= g.Token() {
		t.Fatalf("Java token %d not above Go's %d", jt2, g.Token())
	}
	if err := java.Unlock(ctx, "ledger", 3); err != nil {
		t.Fatal(err)
	}
}

// TestRedissonForceUnlockAndInspect: a Java forceUnlock ends a Go hold
// through Lost at its next renewal and wakes Go waiters; Inspect shows a
// Java hold, and holdfast's ForceUnlock frees it and wakes Java waiters.
func TestRedissonForceUnlockAndInspect(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	java := javaClient(t, srv, "java-1")
	a := redissonClient(t, srv, holdfast.Config{WatchdogTimeout: 600 * time.Millisecond})
	b := redissonClient(t, srv, holdfast.Config{})
	held := a.Lock(ctx, "job")
	mustAcquire(t, held)
	waiter := b.Lock(ctx, "job")
	if heldWithin(waiter, 200*time.Millisecond) {
		t.Fatal("granted beside a holder")
	}
	if ok, err := java.ForceUnlock(ctx, "job"); !ok || err != nil {
		t.Fatalf("Java forceUnlock: %v, %v", ok, err)
	}
	mustAcquire(t, waiter)
	mustLose(t, held, holdfast.ErrNotOwner)
	waiter.Release(ctx)

	if err := java.Lock(ctx, "job", 7, -1); err != nil {
		t.Fatal(err)
	}
	info, err := b.Inspect(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != holdfast.KindLock || len(info.Holders) != 1 || info.Holders[0].Owner != redissontest.LockField("java-1", 7) || info.TTL <= 0 {
		t.Fatalf("Inspect of a Java hold = %+v", info)
	}
	names, err := b.Names(ctx, "")
	if err != nil || len(names) != 1 || names[0] != "job" {
		t.Fatalf("Names = %v, %v", names, err)
	}
	done := make(chan error, 1)
	go func() { done <- java.Lock(ctx, "job", 8, -1) }()
	waitChannel(t, srv, redissontest.LockChannel("job"))
	if err := b.ForceUnlock(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Java waiter not woken by holdfast's ForceUnlock")
	}
	if after, _ := b.Inspect(ctx, "job"); after.Fence <= info.Fence {
		t.Fatalf("fence %d after ForceUnlock, %d before", after.Fence, info.Fence)
	}
	java.Unlock(ctx, "job", 8)
}

// TestRedissonWatchdogsOverManyLeases: Java and Go holders with 600 ms
// watchdogs take turns for several leases each; the other side never gets
// in while one holds, and neither renewal disturbs the other's hold.
func TestRedissonWatchdogsOverManyLeases(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	java := javaClient(t, srv, "java-w", redissontest.WithWatchdogTimeout(600*time.Millisecond))
	c := redissonClient(t, srv, holdfast.Config{WatchdogTimeout: 600 * time.Millisecond})
	if err := java.Lock(ctx, "cron", 1, -1); err != nil {
		t.Fatal(err)
	}
	g := c.Lock(ctx, "cron")
	if heldWithin(g, 2*time.Second) { // more than three Java leases
		t.Fatal("Go granted while the Java watchdog kept its hold")
	}
	java.Unlock(ctx, "cron", 1)
	mustAcquire(t, g)
	if ok, _ := java.TryLock(ctx, "cron", 2, 2000, -1); ok {
		t.Fatal("Java granted while the Go watchdog kept its hold")
	}
	notLost(t, g)
	g.Release(ctx)
}

// TestRedissonReadWriteBothWays: Java and Go readers share; a writer of
// either side waits for them and wakes at the last read unlock; readers of
// either side wait for a writer and wake at its unlock (message 1).
func TestRedissonReadWriteBothWays(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	java := javaClient(t, srv, "java-rw")
	c := redissonClient(t, srv, holdfast.Config{})
	if err := java.ReadLock(ctx, "doc", 1, -1); err != nil {
		t.Fatal(err)
	}
	r := c.ReadLock(ctx, "doc")
	mustAcquire(t, r)
	w := c.WriteLock(ctx, "doc")
	if heldWithin(w, 200*time.Millisecond) {
		t.Fatal("Go writer granted beside readers")
	}
	r.Release(ctx)
	if heldWithin(w, 200*time.Millisecond) {
		t.Fatal("Go writer granted beside a Java reader")
	}
	released := time.Now()
	if err := java.ReadUnlock(ctx, "doc", 1); err != nil {
		t.Fatal(err)
	}
	t.Logf("Go writer granted %v after the last Java read unlock", grantedWithin(t, w, released, 5*time.Second))
	if ok, _ := java.TryReadLock(ctx, "doc", 2, 200, -1); ok {
		t.Fatal("Java reader granted beside a Go writer")
	}
	done := make(chan time.Time, 1)
	go func() {
		if err := java.ReadLock(ctx, "doc", 3, -1); err != nil {
			t.Error(err)
		}
		done <- time.Now()
	}()
	waitChannel(t, srv, redissontest.RWLockChannel("doc"))
	released = time.Now()
	w.Release(ctx)
	select {
	case at := <-done:
		t.Logf("Java reader granted %v after the Go write unlock", at.Sub(released))
	case <-time.After(5 * time.Second):
		t.Fatal("Java reader not woken by the Go write unlock")
	}
	// A Java writer keeps Go readers out and wakes them.
	java.ReadUnlock(ctx, "doc", 3)
	if err := java.WriteLock(ctx, "doc", 4, -1); err != nil {
		t.Fatal(err)
	}
	gr := c.ReadLock(ctx, "doc")
	if heldWithin(gr, 200*time.Millisecond) {
		t.Fatal("Go reader granted beside a Java writer")
	}
	released = time.Now()
	java.WriteUnlock(ctx, "doc", 4)
	t.Logf("Go reader granted %v after the Java write unlock", grantedWithin(t, gr, released, 5*time.Second))
	info, err := c.Inspect(ctx, "doc")
	if err != nil || info.Kind != holdfast.KindRW || len(info.Holders) != 1 || info.Holders[0].Mode != "read" {
		t.Fatalf("Inspect = %+v, %v", info, err)
	}
	gr.Release(ctx)
	if n, _ := srv.Do(t, "EXISTS", "doc").AsInt64(); n != 0 {
		t.Fatal("hash left after the last reader")
	}
}

// TestRedissonNotSupported: kinds Redisson's keys cannot carry end at once.
func TestRedissonNotSupported(t *testing.T) {
	srv := redistest.Start(t)
	c := redissonClient(t, srv, holdfast.Config{})
	ctx := context.Background()
	for _, l := range []*holdfast.Lock{c.Elect(ctx, "x", "me")} {
		if err := l.Wait(ctx); !errors.Is(err, holdfast.ErrNotSupported) {
			t.Fatalf("ended with %v, want ErrNotSupported", err)
		}
	}
	if _, err := holdfast.New(holdfast.Config{Redis: srv.Client(t), Layout: 7}); !errors.Is(err, holdfast.ErrInvalidOption) {
		t.Fatalf("Layout 7: %v", err)
	}
}

// TestRedissonMixedLoad: two Go Clients and two Java clients, three
// goroutines or threads each, cycle on one name for two seconds; a fenced
// store inside the critical section sees one holder at a time and tokens
// that only rise (Java takes RFencedLock tokens).
func TestRedissonMixedLoad(t *testing.T) {
	srv := redistest.Start(t)
	var inside, most, grants, javaGrants atomic.Int64
	var mu sync.Mutex
	var last int64
	store := func(tok int64) {
		mu.Lock()
		defer mu.Unlock()
		if tok <= last {
			t.Errorf("fenced store: token %d after %d", tok, last)
		}
		last = tok
	}
	enter := func() {
		n := inside.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(200 * time.Microsecond)
		inside.Add(-1)
	}
	stop := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for i := range 2 {
		c := redissonClient(t, srv, holdfast.Config{})
		j := javaClient(t, srv, "java-"+string(rune('a'+i)))
		for g := range 3 {
			wg.Add(2)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				for time.Now().Before(stop) {
					l := c.Lock(ctx, "mixed")
					if err := l.Wait(ctx); err != nil {
						t.Errorf("Go: %v", err)
						return
					}
					store(int64(l.Token()))
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
					tok, err := j.LockFenced(ctx, "mixed", thread, -1)
					if err != nil {
						t.Errorf("Java: %v", err)
						return
					}
					store(tok)
					enter()
					grants.Add(1)
					javaGrants.Add(1)
					if err := j.Unlock(ctx, "mixed", thread); err != nil {
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
}

// TestRedissonComposites: LockAll and RedLock over Redisson-layout Clients
// are made of Redisson locks: a Java hold of one name keeps them out.
func TestRedissonComposites(t *testing.T) {
	ctx := context.Background()
	var clients []*holdfast.Client
	var javas []*redissontest.Client
	for i := range 3 {
		srv := redistest.Start(t)
		clients = append(clients, redissonClient(t, srv, holdfast.Config{}))
		javas = append(javas, javaClient(t, srv, "java-"+string(rune('a'+i))))
	}
	all := holdfast.LockAll(ctx, []holdfast.Target{{Client: clients[0], Name: "a"}, {Client: clients[0], Name: "b"}})
	mustAcquire(t, all)
	if ok, _ := javas[0].TryLock(ctx, "b", 1, 100, -1); ok {
		t.Fatal("Java took a name LockAll holds")
	}
	all.Release(ctx)
	for _, j := range javas[:2] {
		if err := j.Lock(ctx, "ledger", 1, -1); err != nil {
			t.Fatal(err)
		}
	}
	red := holdfast.RedLock(ctx, clients, "ledger", holdfast.WithWait(300*time.Millisecond))
	if err := red.Wait(ctx); !errors.Is(err, holdfast.ErrNoQuorum) {
		t.Fatalf("RedLock with Java holding 2 of 3 nodes: %v, want ErrNoQuorum", err)
	}
	for _, j := range javas[:2] {
		j.Unlock(ctx, "ledger", 1)
	}
	red = holdfast.RedLock(ctx, clients, "ledger")
	mustAcquire(t, red)
	red.Release(ctx)
}
