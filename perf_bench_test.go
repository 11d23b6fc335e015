package holdfast_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
)

// BenchmarkUncontended64 is the uncontended cycle: 64 goroutines on
// one Client, each acquiring and releasing its own name. Besides ns/op and
// allocs/op it reports Redis' work per cycle from INFO commandstats: every
// command scripts ran (cmds/op) and the EVALSHA calls (evalsha/op).
func BenchmarkUncontended64(b *testing.B) { benchUncontended64(b, holdfast.Config{}) }

// BenchmarkUncontended64Redisson is the same cycle under the Redisson
// layout (RLock's keys and scripts).
func BenchmarkUncontended64Redisson(b *testing.B) {
	benchUncontended64(b, holdfast.Config{Layout: holdfast.LayoutRedisson})
}

// BenchmarkUncontended64Ctx is the same cycle under a context that can
// end, as a request's or a worker's: each Lock is watched (ctxwatch.go).
func BenchmarkUncontended64Ctx(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	benchUncontended64Under(b, ctx, holdfast.Config{})
}

func benchUncontended64(b *testing.B, cfg holdfast.Config) {
	benchUncontended64Under(b, context.Background(), cfg)
}

func benchUncontended64Under(b *testing.B, ctx context.Context, cfg holdfast.Config) {
	srv := redistest.Start(b)
	c := newClient(b, srv, cfg)
	var next atomic.Int64
	srv.Do(b, "CONFIG", "RESETSTAT")
	redisCPU0, clientCPU0 := redisCPU(b, srv), processCPU(b)
	b.ReportAllocs()
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		name := fmt.Sprintf("bench-%d", next.Add(1))
		for pb.Next() {
			l := c.Lock(ctx, name)
			if err := l.Wait(ctx); err != nil {
				b.Error(err)
				return
			}
			if err := l.Release(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	clientCPU, redisUsed := processCPU(b)-clientCPU0, redisCPU(b, srv)-redisCPU0
	b.ReportMetric(float64(clientCPU.Microseconds())/float64(b.N), "client-cpu-us/op")
	b.ReportMetric(float64(redisUsed.Microseconds())/float64(b.N), "redis-cpu-us/op")
	total, evals := commandTotals(b, srv)
	b.ReportMetric(float64(total)/float64(b.N), "cmds/op")
	b.ReportMetric(float64(evals)/float64(b.N), "evalsha/op")
}

// redisCPU is the user and system CPU time the server has used (INFO cpu).
func redisCPU(t testing.TB, srv *redistest.Server) time.Duration {
	t.Helper()
	info, _ := srv.Do(t, "INFO", "cpu").ToString()
	var total float64
	for _, line := range strings.Split(info, "\n") {
		for _, key := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), key); ok {
				var v float64
				fmt.Sscanf(rest, "%g", &v)
				total += v
			}
		}
	}
	return time.Duration(total * float64(time.Second))
}

// commandTotals sums the calls of every command in INFO commandstats (the
// commands scripts ran included) and returns that sum without the INFO and
// CONFIG calls of the harness, and the EVALSHA calls apart.
func commandTotals(t testing.TB, srv *redistest.Server) (total, evals int64) {
	t.Helper()
	info, _ := srv.Do(t, "INFO", "commandstats").ToString()
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		name, rest, _ := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		var n int64
		fmt.Sscanf(rest, "%d", &n)
		switch {
		case name == "info" || strings.HasPrefix(name, "config"):
		case name == "evalsha" || name == "eval":
			evals += n
		default:
			total += n
		}
	}
	return total, evals
}

// BenchmarkWakeAcrossClients is the release-to-acquire time of a lock handed
// from one Client to a waiter of another Client (another process, as far as
// the lock is concerned): the release's PUBLISH, the waiter's subscription
// connection, its actor's attempt and the grant. Each round's waiter is
// subscribed (so woken by the message, not by its retry timer) before the
// holder releases. It reports the median and p99 in µs.
func BenchmarkWakeAcrossClients(b *testing.B) {
	srv := redistest.Start(b)
	// A long lease: a waiter's retry timer (at the holder's PTTL) never
	// fires within a round, so every grant is the wake-up's.
	cfg := holdfast.Config{WatchdogTimeout: 20 * time.Second}
	holder, waiter := newClient(b, srv, cfg), newClient(b, srv, cfg)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		name := fmt.Sprintf("wake-%d", i)
		h := holder.Lock(ctx, name)
		if err := h.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		w := waiter.Lock(ctx, name)
		waitSubscribed(b, srv, name)
		b.StartTimer()
		start := time.Now()
		if err := h.Release(ctx); err != nil {
			b.Fatal(err)
		}
		if err := w.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		b.StopTimer()
		if err := w.Release(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds()), "p99-us")
}

// rueidisPipelining counts the rueidis connections of this process whose
// writer goroutine runs: connections switched to pipelining. A connection
// used by one caller at a time with calls that state a deadline stays on
// rueidis' synchronous path (the caller writes and reads itself: no
// goroutine hand-off each way).
func rueidisPipelining() int {
	return strings.Count(goroutines(), "rueidis.(*pipe)._backgroundWrite")
}

// TestCallsLeaveTheApplicationsConnectionSynchronous: sequential Lock and
// Release calls on an otherwise idle Client keep the application's rueidis
// connection on its synchronous path. Each script call's context states its
// end as a deadline; a cancellable context without one switched the
// connection to pipelining for good, which made every later call on it —
// the application's own included — pay two goroutine hand-offs.
func TestCallsLeaveTheApplicationsConnectionSynchronous(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	if err := rdb.Do(ctx, rdb.B().Ping().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	before := rueidisPipelining()
	c, err := holdfast.New(holdfast.Config{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 50; i++ {
		l := c.Lock(ctx, "sync")
		if err := l.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := rueidisPipelining() - before; n > 0 {
		t.Fatalf("%d connection(s) switched to pipelining by sequential calls", n)
	}
}
