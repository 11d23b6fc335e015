package holdfast_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
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

// The renewal-failure and lost-hold log lines name the hold by its fencing
// token, so that an operator can match them with the writes a fenced store
// refused.
func TestRenewalFailureLogsNameTheToken(t *testing.T) {
	srv := redistest.Start(t)
	logs := &records{}
	const lease = time.Second
	c := newClient(t, srv, holdfast.Config{WatchdogTimeout: lease, CallTimeout: 100 * time.Millisecond, Logger: slog.New(logs)})
	l := c.Lock(context.Background(), "logged")
	mustAcquire(t, l)
	want := strconv.FormatUint(l.Token(), 10)
	// Scripts may write: CLIENT PAUSE WRITE holds every renewal unanswered.
	srv.Do(t, "CLIENT", "PAUSE", "5000", "WRITE")
	defer srv.Do(t, "CLIENT", "UNPAUSE")
	mustLose(t, l, holdfast.ErrLeaseExpired)
	renew, ok := logs.find(slog.LevelWarn, "Redis call failed")
	if !ok {
		t.Fatalf("no renewal failure logged: %v", logs.all)
	}
	if renew["script"] != "renew" || renew["token"] != want || renew["name"] != "logged" {
		t.Fatalf("renewal failure logged as %v, want script renew, name logged, token %s", renew, want)
	}
	lost, ok := logs.find(slog.LevelWarn, "lock lost")
	if !ok || lost["token"] != want {
		t.Fatalf("lost hold logged as %v (found %v), want token %s", lost, ok, want)
	}
}
