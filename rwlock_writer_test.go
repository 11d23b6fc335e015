package holdfast_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
)

// TestRWWriterNotBehindOwnReader is the stranded-writer case on a real redis-server:
// Client A runs two WriteLock loops with 10 ms holds on a name, so that one
// of its writers always waits and its claim holds new readers back (writer
// preference). Client B asks ReadLock, which that claim holds back, then,
// 50 ms later, WriteLock. B's writer must not wait behind its own Client's
// reader: it goes ahead of it, claims its turn like A's writers, and is
// granted within a few of A's holds. Before the fix both of B's Locks
// waited out 10 s while A was granted 885 times.
func TestRWWriterNotBehindOwnReader(t *testing.T) {
	srv := redistest.Start(t)
	a, b := newClient(t, srv, holdfast.Config{}), newClient(t, srv, holdfast.Config{})
	// The Locks take no context that ends (stop only ends the waits, and
	// each Lock is released): the test is about the queue, not about
	// cancellation racing a Lock's end.
	stop, cancel := context.WithCancel(context.Background())
	bg := context.Background()
	const name, hold = "report", 10 * time.Millisecond
	var grants atomic.Int64 // A's grants so far
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				l := a.WriteLock(bg, name)
				if l.Wait(stop) != nil {
					l.Release(bg)
					return
				}
				grants.Add(1)
				time.Sleep(hold)
				l.Release(bg)
			}
		}()
	}
	for start := time.Now(); grants.Load() < 10; time.Sleep(time.Millisecond) {
		if time.Since(start) > waitFor {
			t.Fatalf("A's writer loops got %d grants in %v", grants.Load(), waitFor)
		}
	}

	r := b.ReadLock(bg, name)
	wg.Add(1)
	go func() { // B's reader, once granted, holds as long as A's writers do
		defer wg.Done()
		if r.Wait(stop) == nil {
			time.Sleep(hold)
		}
		r.Release(bg)
	}()
	time.Sleep(50 * time.Millisecond)
	select {
	case <-r.Acquired:
		// A's loops left a gap without a waiting writer: the reader went
		// through, and the writer below would not be behind it.
		t.Fatal("B's reader was granted beside A's writer loops: the case is not reproduced (A's claims did not hold it back)")
	default:
	}
	before, asked := grants.Load(), time.Now()
	w := b.WriteLock(bg, name, holdfast.WithWait(10*time.Second))
	err := w.Wait(bg)
	waited, during := time.Since(asked), grants.Load()-before
	readerFirst := isClosed(r.Acquired)
	if err == nil {
		time.Sleep(hold)
		w.Release(bg)
	}
	t.Logf("B's writer waited %v; A was granted %d times meanwhile; B's reader granted before it: %v", waited, during, readerFirst)
	if err != nil {
		t.Fatalf("B's writer not granted (A was granted %d times in %v): %v", during, waited, err)
	}
	// The bounds are generous: B's writer competes with A's for each turn
	// (writers of different Clients are not ordered), and a loaded machine
	// slows every round trip. What they exclude is a writer stranded for as
	// long as A keeps a writer waiting.
	if waited > time.Second || during > 40 {
		t.Fatalf("B's writer waited %v, through %d of A's 10 ms holds", waited, during)
	}
	if readerFirst {
		t.Fatal("B's reader, held back when B's writer asked, was granted before the writer")
	}
}
