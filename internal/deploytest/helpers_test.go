package deploytest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast"
)

// waitFor is the generous bound of every wait on a channel in these tests:
// reaching it is a failure, never the expected path.
const waitFor = 20 * time.Second

func newClient(t testing.TB, rc rueidis.Client, cfg holdfast.Config) *holdfast.Client {
	t.Helper()
	cfg.Redis = rc
	c, err := holdfast.New(cfg)
	if err != nil {
		t.Fatalf("holdfast.New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func mustAcquire(t testing.TB, l *holdfast.Lock) {
	t.Helper()
	select {
	case <-l.Acquired:
	case <-l.Lost:
		t.Fatalf("lock %q lost before acquired: %v", l.Name(), l.Err())
	case <-time.After(waitFor):
		t.Fatalf("lock %q not acquired within %v", l.Name(), waitFor)
	}
}

// mustLose waits for l's Lost and checks that Err is one of want.
func mustLose(t testing.TB, l *holdfast.Lock, want ...error) {
	t.Helper()
	select {
	case <-l.Lost:
	case <-time.After(waitFor):
		t.Fatalf("lock %q: Lost not closed within %v", l.Name(), waitFor)
	}
	for _, w := range want {
		if errors.Is(l.Err(), w) {
			return
		}
	}
	t.Fatalf("lock %q ended with %v, want one of %v", l.Name(), l.Err(), want)
}

func notLost(t testing.TB, l *holdfast.Lock) {
	t.Helper()
	select {
	case <-l.Lost:
		t.Fatalf("lock %q lost: %v", l.Name(), l.Err())
	default:
	}
}

func pending(t testing.TB, l *holdfast.Lock) {
	t.Helper()
	select {
	case <-l.Acquired:
		t.Fatalf("lock %q granted while another holds it", l.Name())
	case <-l.Lost:
		t.Fatalf("lock %q over while waiting: %v", l.Name(), l.Err())
	default:
	}
}

// holdsThenWakes checks a hold after a failover: another Client still
// cannot take name, the holder h keeps it, the waiter w still waits, and
// h's release wakes w through pub/sub on the new primary (where) within
// 5s, instead of w sleeping out its holder's 15s lease.
func holdsThenWakes(t *testing.T, other *holdfast.Client, name string, h, w *holdfast.Lock, where string) {
	t.Helper()
	ctx := context.Background()
	o := other.Lock(ctx, name, holdfast.WithWait(time.Second))
	mustLose(t, o, holdfast.ErrWaitTimeout)
	notLost(t, h)
	pending(t, w)

	rel := time.Now()
	if err := h.Release(ctx); err != nil {
		t.Fatalf("release after failover: %v", err)
	}
	select {
	case <-w.Acquired:
		t.Logf("waiter woken %v after the release on the %s", time.Since(rel).Round(time.Millisecond), where)
	case <-w.Lost:
		t.Fatalf("waiter lost: %v", w.Err())
	case <-time.After(5 * time.Second):
		t.Fatalf("waiter not woken within 5s of the release (it would otherwise sleep out the 15s lease)")
	}
	if err := w.Release(ctx); err != nil {
		t.Fatalf("waiter release: %v", err)
	}
}
