package renewal

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

// waitFor bounds every wait of these tests on a goroutine: reaching it is
// a failure, never the expected path.
const waitFor = 20 * time.Second

// blockingPrepare is a Prepare that blocks until released or its context
// is done, and counts its runs.
type blockingPrepare struct {
	started  chan struct{} // one send per run
	release  chan struct{}
	runs     atomic.Int32
	running  atomic.Int32
	finished atomic.Int32
	ctxErr   atomic.Value // error of the last run's context, once done
}

func newBlockingPrepare() *blockingPrepare {
	return &blockingPrepare{started: make(chan struct{}, 16), release: make(chan struct{})}
}

func (p *blockingPrepare) prepare(ctx context.Context) {
	p.runs.Add(1)
	if p.running.Add(1) > 1 {
		panic("two Prepares at once")
	}
	p.started <- struct{}{}
	select {
	case <-p.release:
	case <-ctx.Done():
		p.ctxErr.Store(ctx.Err())
	}
	p.running.Add(-1)
	p.finished.Add(1)
}

// round adds n items under prefix, flushes them and waits for every Done.
func round(t *testing.T, b *Batcher, flushes *[]func(), prefix string, n int) map[string]outcome {
	t.Helper()
	results := map[string]outcome{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for k := range n {
		add(b, fmt.Sprintf("%s:%d", prefix, k), results, &mu, &wg)
	}
	(*flushes)[len(*flushes)-1]()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatalf("round %s: not every item answered within %v", prefix, waitFor)
	}
	return results
}

// TestPrepareDoesNotDelayRounds: a Prepare that does not return (a slot
// map read landing on a frozen node) holds back no round: rounds send and
// answer while it runs, no second Prepare starts beside it, it ends when
// its context reaches Timeout, and the next round starts another.
func TestPrepareDoesNotDelayRounds(t *testing.T) {
	f := &fakeRedis{gone: map[string]bool{}}
	var flushes []func()
	clk := clock.NewMock()
	p := newBlockingPrepare()
	const timeout = 5 * time.Second
	b := New(Config{
		Clock:   clk,
		After:   func(_ time.Duration, fn func()) { flushes = append(flushes, fn) },
		Exec:    f.exec,
		Group:   func(string) uint16 { return 0 },
		Prepare: p.prepare,
		Timeout: timeout,
	})
	defer b.Close()

	for i := range 3 {
		results := round(t, b, &flushes, fmt.Sprintf("r%d", i), 3)
		for k, r := range results {
			if r.err != nil || !r.renewed {
				t.Fatalf("%s: renewed %v, %v while Prepare runs", k, r.renewed, r.err)
			}
		}
	}
	select {
	case <-p.started:
	case <-time.After(waitFor):
		t.Fatal("Prepare not started")
	}
	if runs, fin := p.runs.Load(), p.finished.Load(); runs != 1 || fin != 0 {
		t.Fatalf("%d Prepares started and %d finished during 3 rounds, want 1 still running", runs, fin)
	}
	if len(f.batches) != 3 {
		t.Fatalf("%d calls for 3 rounds, want 3", len(f.batches))
	}

	// Prepare's context is bounded by Timeout on the Batcher's clock.
	clk.Add(timeout)
	eventually(t, func() bool { return p.finished.Load() == 1 })
	if err, _ := p.ctxErr.Load().(error); err != context.DeadlineExceeded {
		t.Fatalf("Prepare ended with its context's %v, want DeadlineExceeded", err)
	}

	close(p.release)
	round(t, b, &flushes, "after", 2)
	eventually(t, func() bool { return p.runs.Load() >= 2 })
}

// TestCloseWaitsForPrepare: Close returns only once a running Prepare has.
func TestCloseWaitsForPrepare(t *testing.T) {
	f := &fakeRedis{gone: map[string]bool{}}
	var flushes []func()
	p := newBlockingPrepare()
	b := New(Config{
		Clock:   clock.NewMock(),
		After:   func(_ time.Duration, fn func()) { flushes = append(flushes, fn) },
		Exec:    f.exec,
		Group:   func(string) uint16 { return 0 },
		Prepare: p.prepare,
	})
	round(t, b, &flushes, "r", 1)
	<-p.started
	closed := make(chan int32)
	go func() {
		b.Close()
		closed <- p.finished.Load()
	}()
	time.Sleep(50 * time.Millisecond) // room for a Close that would not wait
	close(p.release)
	select {
	case fin := <-closed:
		if fin != 1 {
			t.Fatal("Close returned while Prepare was running")
		}
	case <-time.After(waitFor):
		t.Fatal("Close did not return")
	}
	if p.runs.Load() != 1 {
		t.Fatalf("%d Prepares, want 1 (none after Close)", p.runs.Load())
	}
}

// eventually polls cond until it holds or waitFor passes.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v", waitFor)
		}
		time.Sleep(time.Millisecond)
	}
}
