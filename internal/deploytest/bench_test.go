package deploytest

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/internal/topology"
)

// The benchmarks below measure fixed scenarios once; run them with
// -benchtime=1x for the renewal ones, e.g.
//
//	go test -run '^$' -bench . -benchtime=1x ./internal/deploytest/

const (
	renewHeld     = 10_000
	renewWatchdog = 3 * time.Second // renewed every second
)

// renewWindow is the quiet hold window the renewal benchmarks measure: 3s,
// or HOLDFAST_RENEW_WINDOW (e.g. 20s, for a steadier client CPU figure).
// HOLDFAST_RENEW_PROFILE names a file to write a CPU profile of the window
// alone to (the acquisitions before it left out); HOLDFAST_RENEW_MEMPROFILE
// one for heap profiles (see heapProfile).
var renewWindow = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("HOLDFAST_RENEW_WINDOW")); err == nil && d > 0 {
		return d
	}
	return 3 * time.Second
}()

// scriptCalls sums the EVALSHA and EVAL calls a server counted since its
// last CONFIG RESETSTAT.
func scriptCalls(b testing.TB, do func(args ...string) (rueidis.RedisMessage, error)) int64 {
	msg, err := do("INFO", "commandstats")
	if err != nil {
		b.Fatalf("INFO commandstats: %v", err)
	}
	s, _ := msg.ToString()
	var total int64
	for _, line := range strings.Split(strings.TrimPrefix(s, "txt:"), "\n") {
		line = strings.TrimSpace(line)
		for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
			if rest, ok := strings.CutPrefix(line, cmd); ok {
				calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
				n, _ := strconv.ParseInt(calls, 10, 64)
				total += n
			}
		}
	}
	return total
}

// benchRenewal holds renewHeld watchdog locks and counts the renew script
// calls the servers run over renewWindow: calls/s and locks renewed per call.
func benchRenewal(b *testing.B, rc rueidis.Client, servers []func(args ...string) (rueidis.RedisMessage, error)) {
	hf, err := holdfast.New(holdfast.Config{Redis: rc, WatchdogTimeout: renewWatchdog})
	if err != nil {
		b.Fatal(err)
	}
	defer hf.Close()
	ctx := context.Background()
	locks := make([]*holdfast.Lock, renewHeld)
	for i := range locks {
		locks[i] = hf.Lock(ctx, fmt.Sprintf("renew:%d", i))
	}
	for _, l := range locks {
		mustAcquire(b, l)
	}
	for _, do := range servers {
		if _, err := do("CONFIG", "RESETSTAT"); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	if path := os.Getenv("HOLDFAST_RENEW_PROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
	}
	heapProfile(b, ".0")
	cpu0 := cpuTime()
	time.Sleep(renewWindow)
	cpu := cpuTime() - cpu0
	heapProfile(b, ".1")
	if os.Getenv("HOLDFAST_RENEW_PROFILE") != "" {
		pprof.StopCPUProfile()
	}
	b.StopTimer()
	var calls int64
	for _, do := range servers {
		calls += scriptCalls(b, do)
	}
	for _, l := range locks {
		notLost(b, l)
	}
	renewals := float64(renewHeld) * float64(renewWindow/(renewWatchdog/3))
	b.ReportMetric(float64(calls)/renewWindow.Seconds(), "calls/s")
	b.ReportMetric(renewals/float64(calls), "locks/call")
	b.ReportMetric(100*cpu.Seconds()/renewWindow.Seconds(), "client-cpu-%")
}

// heapProfile writes a heap profile to HOLDFAST_RENEW_MEMPROFILE plus
// suffix, when set: the allocations of the window are those of the ".1"
// profile less the ".0" one (go tool pprof -sample_index=alloc_space
// -base FILE.0 FILE.1).
func heapProfile(b testing.TB, suffix string) {
	path := os.Getenv("HOLDFAST_RENEW_MEMPROFILE")
	if path == "" {
		return
	}
	f, err := os.Create(path + suffix)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// cpuTime is the CPU time (user and system) this process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkRenewalStandalone(b *testing.B) {
	srv := redistest.Start(b)
	b.Cleanup(srv.Kill)
	node := func(args ...string) (rueidis.RedisMessage, error) {
		return *srv.Do(b, args...), nil
	}
	benchRenewal(b, srv.Client(b), []func(...string) (rueidis.RedisMessage, error){node})
}

func BenchmarkRenewalCluster(b *testing.B) {
	c := topology.StartCluster(b, 3)
	var nodes []func(...string) (rueidis.RedisMessage, error)
	for _, n := range c.Masters {
		nodes = append(nodes, n.Do)
	}
	benchRenewal(b, c.Client(b), nodes)
}

// BenchmarkCyclesSentinel runs uncontended lock/release cycles (each
// goroutine its own names, 8 goroutines per core) through Sentinel to a
// primary with one replica, with SyncReplicas 0 and 1.
func BenchmarkCyclesSentinel(b *testing.B) {
	s := topology.StartSentinel(b)
	rc := s.Client(b)
	for _, sync := range []int{0, 1} {
		b.Run(fmt.Sprintf("SyncReplicas=%d", sync), func(b *testing.B) {
			hf, err := holdfast.New(holdfast.Config{Redis: rc, SyncReplicas: sync})
			if err != nil {
				b.Fatal(err)
			}
			defer hf.Close()
			var next atomic.Int64
			b.SetParallelism(8)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				g := next.Add(1)
				i := 0
				for pb.Next() {
					i++
					l := hf.Lock(ctx, fmt.Sprintf("cycle:%d:%d", g, i%64))
					if err := l.Wait(ctx); err != nil {
						b.Errorf("lock: %v", err)
						return
					}
					if err := l.Release(ctx); err != nil {
						b.Errorf("release: %v", err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "cycles/s")
		})
	}
}
