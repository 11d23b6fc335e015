//go:build unix

package holdfast_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
)

// idleWindow is how long each idle measurement lasts.
const idleWindow = 5 * time.Second

// BenchmarkIdleCPU measures the CPU this process spends over idleWindow with
// an idle Client (after one lock, once its actor has passivated) against a
// bare rueidis client on the same server: the Client should add nothing.
// Run it alone: go test -run '^$' -bench IdleCPU -benchtime 1x .
func BenchmarkIdleCPU(b *testing.B) {
	srv := redistest.Start(b)
	b.Run("rueidis", func(b *testing.B) {
		c := srv.Client(b)
		if err := c.Do(context.Background(), c.B().Ping().Build()).Error(); err != nil {
			b.Fatal(err)
		}
		measureIdle(b)
	})
	b.Run("holdfast-fresh", func(b *testing.B) {
		c, err := holdfast.New(holdfast.Config{Redis: srv.Client(b)})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		measureIdle(b)
	})
	b.Run("holdfast", func(b *testing.B) {
		c, err := holdfast.New(holdfast.Config{Redis: srv.Client(b)})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		l := c.Lock(context.Background(), "idle")
		if err := l.Wait(context.Background()); err != nil {
			b.Fatal(err)
		}
		if err := l.Release(context.Background()); err != nil {
			b.Fatal(err)
		}
		for c.Actors() > 0 { // the actor lingers a second, then passivates
			time.Sleep(10 * time.Millisecond)
		}
		measureIdle(b)
	})
}

// measureIdle sleeps idleWindow per iteration and reports the process's CPU
// time per window in milliseconds.
func measureIdle(b *testing.B) {
	b.ResetTimer()
	start := processCPU(b)
	for i := 0; i < b.N; i++ {
		time.Sleep(idleWindow)
	}
	used := processCPU(b) - start
	b.ReportMetric(float64(used)/float64(time.Millisecond)/float64(b.N), "cpu-ms/5s")
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
