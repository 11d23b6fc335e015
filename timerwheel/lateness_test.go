package timerwheel

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

// BenchmarkLatenessUnderLoad measures how late the wheel's timers fire on
// the real clock, idle and with busy goroutines spinning on every CPU (a
// loaded service), including the hop from the timer's function to another
// goroutine, which is how a lock actor hears its deadline timer. It reports
// the lateness past each timer's deadline (by design up to one tick, more
// under load) at the median, p99, p99.9 and worst. holdfast's deadline
// timer is set that much early (Config.Slack, api.go); rerun this after
// changing the wheel or the runtime:
//
//	go test -run '^$' -bench LatenessUnderLoad -benchtime 2000x ./timerwheel/
func BenchmarkLatenessUnderLoad(b *testing.B) {
	for _, spinners := range []int{0, runtime.GOMAXPROCS(0), 4 * runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("spinners=%d", spinners), func(b *testing.B) {
			var stop atomic.Bool
			var spin sync.WaitGroup
			for range spinners {
				spin.Add(1)
				go func() {
					defer spin.Done()
					for n := 0; !stop.Load(); n++ {
						if n%1_000_000 == 0 {
							runtime.Gosched() // a busy service yields now and then, as function calls do
						}
					}
				}()
			}
			defer func() { stop.Store(true); spin.Wait() }()

			w := New(clock.New(), tick, 512)
			w.Start()
			defer w.Stop()
			hop := make(chan time.Time, 64) // the actor's mailbox, in effect
			late := make([]time.Duration, b.N)
			var got sync.WaitGroup
			got.Add(b.N)
			deadlines := make([]time.Time, b.N)
			fired := make(chan int, b.N)
			go func() {
				for i := range fired {
					at := <-hop
					late[i] = at.Sub(deadlines[i])
					got.Done()
				}
			}()
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				// Spread over the wheel's ticks: 5ms apart, offsets within a tick varied.
				deadlines[i] = start.Add(20*time.Millisecond + time.Duration(i)*5*time.Millisecond + time.Duration(i*7919%10_000)*time.Microsecond)
				w.Schedule(deadlines[i], func() {
					fired <- i
					hop <- time.Now()
				})
			}
			got.Wait()
			close(fired)
			b.StopTimer()
			slices.Sort(late)
			q := func(p float64) float64 { return float64(late[int(p*float64(len(late)-1))]) / float64(time.Millisecond) }
			b.ReportMetric(q(0.5), "p50-late-ms")
			b.ReportMetric(q(0.99), "p99-late-ms")
			b.ReportMetric(q(0.999), "p99.9-late-ms")
			b.ReportMetric(q(1), "max-late-ms")
			b.ReportMetric(float64(tick)/float64(time.Millisecond), "tick-ms")
		})
	}
}
