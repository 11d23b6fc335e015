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

// TestLostLeavesSchedulingMargin: a fixed lease's Lost closes at least one
// wheel tick (10ms) before Deadline() when timers are not delayed at all
// (fake time), so that up to a tick of scheduling delay under CPU load still
// finds Lost closed before the deadline. With a slack of one tick, the
// margin was anywhere in [0, 10ms). The leases have odd milliseconds so that
// deadlines fall between ticks.
func TestLostLeavesSchedulingMargin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mr := miniredis.NewMiniRedis()
		mr.ClockTTL(true)
		defer mr.Close()
		rdb, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress: []string{"miniredis"},
			DialCtxFn: func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) {
				return mr.Dial()
			},
			DisableCache: true, ForceSingleClient: true, AlwaysRESP2: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer rdb.Close()
		c, err := holdfast.New(holdfast.Config{Redis: rdb})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, lease := range []time.Duration{50 * time.Millisecond, 77 * time.Millisecond, 1003 * time.Millisecond, 2005 * time.Millisecond, 4999 * time.Millisecond} {
			l := c.Lock(context.Background(), "margin", holdfast.WithLease(lease))
			if err := l.Wait(context.Background()); err != nil {
				t.Fatalf("lease %v: %v", lease, err)
			}
			<-l.Lost
			margin := l.Deadline().Sub(time.Now())
			if !errors.Is(l.Err(), holdfast.ErrLeaseExpired) {
				t.Fatalf("lease %v ended with %v", lease, l.Err())
			}
			if margin < 10*time.Millisecond {
				t.Errorf("lease %v: Lost closed %v before Deadline, less than a wheel tick", lease, margin)
			}
			mr.FastForward(lease) // let Redis expire the key for the next round
		}
	})
}
