package holdfast_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
)

// A renewal stuck on a server that does not answer fails after CallTimeout
// and is tried again; when the lease runs out, the error says what the last
// try met.
func TestRenewalsAreBoundedByCallTimeout(t *testing.T) {
	srv := redistest.Start(t)
	const lease = time.Second
	c := newClient(t, srv, holdfast.Config{WatchdogTimeout: lease, CallTimeout: 100 * time.Millisecond})
	l := c.Lock(context.Background(), "paused")
	mustAcquire(t, l)
	// Scripts may write: CLIENT PAUSE WRITE holds every renewal unanswered.
	srv.Do(t, "CLIENT", "PAUSE", "5000", "WRITE")
	defer srv.Do(t, "CLIENT", "UNPAUSE")
	mustLose(t, l, holdfast.ErrLeaseExpired)
	if !errors.Is(l.Err(), context.DeadlineExceeded) || !strings.Contains(l.Err().Error(), "last renewal error") {
		t.Fatalf("lost with %v, want the last renewal's timeout behind ErrLeaseExpired", l.Err())
	}
}

// With Redis gone, a watchdog hold ends with the connection error behind
// ErrLeaseExpired, and a bounded wait with it behind ErrWaitTimeout.
func TestRedisDownErrorsSayWhy(t *testing.T) {
	srv := redistest.Start(t)
	const lease = 500 * time.Millisecond
	c := newClient(t, srv, holdfast.Config{WatchdogTimeout: lease, CallTimeout: 200 * time.Millisecond})
	l := c.Lock(context.Background(), "down")
	mustAcquire(t, l)
	srv.Kill()
	mustLose(t, l, holdfast.ErrLeaseExpired)
	// The last renewal before the deadline met the refused reconnection, or,
	// on a loaded machine where no retry came before the deadline, the end
	// of the connection the kill closed under the renewal in flight.
	if !errors.Is(l.Err(), syscall.ECONNREFUSED) && !errors.Is(l.Err(), io.EOF) {
		t.Fatalf("lost with %v, want the connection error behind it", l.Err())
	}
	w := c.Lock(context.Background(), "down", holdfast.WithWait(300*time.Millisecond))
	mustLose(t, w, holdfast.ErrWaitTimeout)
	if !errors.Is(w.Err(), syscall.ECONNREFUSED) {
		t.Fatalf("wait ended with %v, want the connection error behind it", w.Err())
	}
	t.Logf("hold: %v", l.Err())
	t.Logf("wait: %v", w.Err())
}
