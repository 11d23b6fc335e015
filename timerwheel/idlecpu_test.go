//go:build unix

package timerwheel

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

// cpuTime returns the CPU time (user and system) the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIdleCPU measures what a started wheel costs while it holds
// timers that are seconds away — waiters whose retry timers and renewals
// are far off — on the real clock: the process's CPU
// over a window of wall time in which none of them is due (the timers are
// set 1 s past its end), and the wheel goroutine's wake-ups in it.
// timers=0 is the floor: the same process with an empty wheel. Each op is
// one window; run it once:
//
//	go test -run '^$' -bench IdleCPU -benchtime 1x ./timerwheel/
func BenchmarkIdleCPU(b *testing.B) {
	const window = 5 * time.Second
	for _, n := range []int{0, 100} {
		b.Run(fmt.Sprintf("timers=%d", n), func(b *testing.B) {
			var cpu time.Duration
			var wakeups int64
			for range b.N {
				w := New(clock.New(), tick, 512)
				w.Start()
				start := time.Now()
				for i := range n {
					w.Schedule(start.Add(window+time.Second+time.Duration(i)*time.Millisecond), func() {})
				}
				c0 := cpuTime(b)
				time.Sleep(window)
				cpu += cpuTime(b) - c0
				wakeups += w.Wakeups()
				w.Stop()
			}
			per := cpu / time.Duration(b.N)
			b.ReportMetric(float64(per)/float64(time.Millisecond), "cpu-ms/window")
			b.ReportMetric(100*float64(per)/float64(window), "%core")
			b.ReportMetric(float64(wakeups)/float64(b.N), "wakeups/window")
		})
	}
}
