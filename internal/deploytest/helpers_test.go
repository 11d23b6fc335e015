package deploytest

import (
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
