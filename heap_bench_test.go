package holdfast_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
)

// BenchmarkHeapPerClient is the heap per Client: the live heap that
// each of 20 Clients adds, on one shared rueidis client (the Config.Redis a
// program passes to all of them), each after one lock cycle so that what a
// working Client sets up lazily is counted. What the process sets up once
// (one Client made and used first) is not.
func BenchmarkHeapPerClient(b *testing.B) {
	srv := redistest.Start(b)
	rc := srv.Client(b)
	ctx := context.Background()
	cycle := func(c *holdfast.Client, name string) {
		l := c.Lock(ctx, name)
		if err := l.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	first, err := holdfast.New(holdfast.Config{Redis: rc})
	if err != nil {
		b.Fatal(err)
	}
	defer first.Close()
	cycle(first, "heap-first")
	const n = 20
	var total float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		clients := make([]*holdfast.Client, 0, n)
		var m0, m1 runtime.MemStats
		settle()
		runtime.ReadMemStats(&m0)
		for j := 0; j < n; j++ {
			c, err := holdfast.New(holdfast.Config{Redis: rc})
			if err != nil {
				b.Fatal(err)
			}
			clients = append(clients, c)
			cycle(c, fmt.Sprintf("heap-%d", j))
		}
		settle()
		runtime.ReadMemStats(&m1)
		total += float64(m1.HeapAlloc) - float64(m0.HeapAlloc)
		for _, c := range clients {
			c.Close()
		}
	}
	b.ReportMetric(total/float64(b.N*n), "heap-B/client")
}

// BenchmarkHeapPerHeldLock is the heap per held lock: 10,000 locks
// held at once by one Client, each with the watchdog renewing it, and the
// live heap they add once held a while: past the idle linger, when a quiet
// hold sleeps as a record (actor.DefaultIdleTimeout). (bench/ holds
// 100,000; this is its quick form.) It reports the heap just after the
// grants too (heap-B/lock-awake).
func BenchmarkHeapPerHeldLock(b *testing.B) {
	srv := redistest.Start(b)
	c := newClient(b, srv, holdfast.Config{})
	ctx := context.Background()
	const n = 10000
	names := make([]string, n)
	// One cycle first: what the Client sets up once is not the locks'.
	l := c.Lock(ctx, "held-warmup")
	if err := l.Wait(ctx); err != nil {
		b.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		b.Fatal(err)
	}
	locks := make([]*holdfast.Lock, n)
	var total, awake float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Fresh names each round: a name held in an earlier round may
		// still have its actor (it lingers after the release), and a
		// reused actor would hide what a new held lock costs.
		for j := range names {
			names[j] = fmt.Sprintf("held-%d-%d", i, j)
		}
		var m0, m1 runtime.MemStats
		settle()
		runtime.ReadMemStats(&m0)
		parallelN(64, n, func(j int) {
			locks[j] = c.Lock(ctx, names[j])
			if err := locks[j].Wait(ctx); err != nil {
				b.Error(err)
			}
		})
		settle()
		runtime.ReadMemStats(&m1)
		awake += float64(m1.HeapAlloc) - float64(m0.HeapAlloc)
		// Held a while: the holds sleep after the linger.
		deadline := time.Now().Add(waitFor)
		for holdfast.Sleeping(c) < n && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if s := holdfast.Sleeping(c); s < n {
			b.Fatalf("%d of %d held locks asleep after %v", s, n, waitFor)
		}
		settle()
		runtime.ReadMemStats(&m1)
		total += float64(m1.HeapAlloc) - float64(m0.HeapAlloc)
		parallelN(64, n, func(j int) {
			if err := locks[j].Release(ctx); err != nil {
				b.Error(err)
			}
			locks[j] = nil
		})
	}
	b.ReportMetric(total/float64(b.N*n), "heap-B/lock")
	b.ReportMetric(awake/float64(b.N*n), "heap-B/lock-awake")
}

// parallelN runs fn(0..n-1) on g goroutines.
func parallelN(g, n int, fn func(i int)) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for k := 0; k < g; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// settle collects garbage twice: what sync.Pools hold survives one
// collection (their victim cache), and is not what is being measured.
func settle() {
	runtime.GC()
	runtime.GC()
}

// BenchmarkHeapPerQuietHold is the heap per quiet hold: 100,000
// locks held at once by one Client with the watchdog, asleep as records
// (past the idle linger) and renewing — WatchdogTimeout 9 s, so the
// records renew every 3 s and the cost is read after a round of renewals
// (a shorter lease lost holds on the shared 2-core machine). It reports the live heap the holds add, the user's *Lock
// handles included, per hold (B/hold): the mean of four readings a
// quarter second apart, since renewals in flight come and go. The names
// are the caller's and are made before the baseline, and so is what the
// Client sets up once: the warm-up takes and releases locks from as many
// goroutines as the holds are taken by, so that the connections rueidis
// opens under that load (about 2 MB of buffers, 20 bytes a hold) are not
// counted as the holds'.
func BenchmarkHeapPerQuietHold(b *testing.B) {
	const n = 100_000
	srv := redistest.Start(b)
	c := newClient(b, srv, holdfast.Config{WatchdogTimeout: 9 * time.Second})
	ctx := context.Background()
	parallelN(64, 64*20, func(j int) {
		l := c.Lock(ctx, fmt.Sprintf("quiet-warmup-%d", j%64))
		if err := l.Wait(ctx); err != nil {
			b.Error(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Error(err)
		}
	})
	names := make([]string, n)
	locks := make([]*holdfast.Lock, n)
	var total float64
	lost := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range names {
			names[j] = fmt.Sprintf("quiet-%d-%d", i, j)
		}
		var m0, m1 runtime.MemStats
		settle()
		runtime.ReadMemStats(&m0)
		parallelN(64, n, func(j int) {
			locks[j] = c.Lock(ctx, names[j])
			if err := locks[j].Wait(ctx); err != nil {
				b.Error(err)
			}
		})
		deadline := time.Now().Add(4 * waitFor)
		for holdfast.Sleeping(c) < n && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if s := holdfast.Sleeping(c); s < n {
			b.Fatalf("%d of %d held locks asleep after %v", s, n, 4*waitFor)
		}
		time.Sleep(3 * time.Second) // a round of renewals
		var heap float64
		for range 4 {
			time.Sleep(250 * time.Millisecond)
			settle()
			runtime.ReadMemStats(&m1)
			heap += (float64(m1.HeapAlloc) - float64(m0.HeapAlloc)) / 4
		}
		total += heap
		for _, l := range locks {
			select {
			case <-l.Lost:
				lost++
			default:
			}
		}
		parallelN(64, n, func(j int) {
			locks[j].Release(ctx) // a lost hold answers ErrNotHeld
			locks[j] = nil
		})
	}
	b.ReportMetric(total/float64(b.N*n), "B/hold")
	b.ReportMetric(float64(lost)/float64(b.N), "lost-holds")
}
