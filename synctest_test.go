package holdfast_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast"
)

// TestFakeTimeRenewalAndWaitBudget runs the whole stack — protoactor,
// rueidis, the wheel, the watchdog, pub/sub — against miniredis over
// net.Pipe inside a synctest bubble, where time is fake: a minute of lock
// life takes milliseconds.
func TestFakeTimeRenewalAndWaitBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mr := miniredis.NewMiniRedis()
		mr.ClockTTL(true) // TTLs follow the bubble's clock
		defer mr.Close()
		newRedis := func() rueidis.Client {
			rdb, err := rueidis.NewClient(rueidis.ClientOption{
				InitAddress: []string{"miniredis"},
				DialCtxFn: func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) {
					return mr.Dial()
				},
				DisableCache:      true,
				ForceSingleClient: true,
				AlwaysRESP2:       true,
			})
			if err != nil {
				t.Fatal(err)
			}
			return rdb
		}
		rdbA, rdbB := newRedis(), newRedis()
		defer rdbA.Close()
		defer rdbB.Close()
		const lease = 30 * time.Second
		a, err := holdfast.New(holdfast.Config{Redis: rdbA, WatchdogTimeout: lease})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := holdfast.New(holdfast.Config{Redis: rdbB, WatchdogTimeout: lease})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()

		start := time.Now()
		l := a.Lock(context.Background(), "nightly")
		if err := l.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		first := l.Deadline()
		if want := start.Add(lease - lease/100 - 2*time.Millisecond); first.Before(want) || first.After(want.Add(50*time.Millisecond)) {
			t.Fatalf("first deadline %v, want %v", first.Sub(start), want.Sub(start))
		}
		// Renewed every lease/3 on an absolute grid: after k periods the
		// deadline is k periods further, give or take two wheel ticks.
		for k := 1; k <= 6; k++ {
			time.Sleep(lease/3 + 100*time.Millisecond)
			synctest.Wait()
			grid := start.Add(time.Duration(k) * lease / 3)
			want := grid.Add(lease - lease/100 - 2*time.Millisecond)
			if got := l.Deadline(); got.Before(want) || got.After(want.Add(100*time.Millisecond)) {
				t.Fatalf("after %d periods the deadline is %v, want %v (+100ms)", k, got.Sub(start), want.Sub(start))
			}
		}
		if ttl := mr.TTL("holdfast:{nightly}"); ttl <= 0 {
			t.Fatalf("TTL %v after %v: not renewed in Redis", ttl, 2*lease)
		}

		waitStart := time.Now()
		w := b.Lock(context.Background(), "nightly", holdfast.WithWait(5*time.Second))
		<-w.Lost
		waited := time.Since(waitStart)
		if !errors.Is(w.Err(), holdfast.ErrWaitTimeout) {
			t.Fatalf("waiter ended with %v", w.Err())
		}
		if waited < 5*time.Second || waited > 5*time.Second+50*time.Millisecond {
			t.Fatalf("wait budget of 5s ended after %v", waited)
		}
		select {
		case <-l.Lost:
			t.Fatalf("holder lost: %v", l.Err())
		default:
		}
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}
