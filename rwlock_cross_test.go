package holdfast_test

import (
	"context"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
)

// TestRWWriterClaimStopsHoldersClientReaders is writer preference across
// Clients on a real redis-server: Client R holds a read lock; Client I asks
// WriteLock and waits, its claim in Redis; then R asks a second read lock
// (another owner). The claim stops that new reader although its Client
// already reads the name: when R's first reader releases, I's writer is
// granted, and R's second reader waits for the writer's release.
func TestRWWriterClaimStopsHoldersClientReaders(t *testing.T) {
	srv := redistest.Start(t)
	r, i := newClient(t, srv, holdfast.Config{}), newClient(t, srv, holdfast.Config{})
	ctx := context.Background()
	const name = "claim"
	pause := 100 * time.Millisecond // R's second reader has tried and been told to wait

	r1 := r.ReadLock(ctx, name)
	mustAcquire(t, r1)
	w := i.WriteLock(ctx, name)
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		info, err := r.Inspect(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters == 1 {
			break
		}
		if time.Since(start) > waitFor {
			t.Fatalf("I's writer left no claim within %v: %+v", waitFor, info)
		}
	}
	r2 := r.ReadLock(ctx, name)
	select {
	case <-r2.Acquired:
		t.Fatal("R's second reader was granted past I's waiting writer's claim")
	case <-r2.Lost:
		t.Fatalf("R's second reader lost: %v", r2.Err())
	case <-time.After(pause):
	}
	if err := r1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Acquired:
	case <-w.Lost:
		t.Fatalf("I's writer lost: %v", w.Err())
	case <-time.After(3 * time.Second):
		info, _ := r.Inspect(ctx, name)
		t.Fatalf("I's writer not granted within 3 s of the reader's release (R's second reader granted: %v); Inspect: %+v",
			isClosed(r2.Acquired), info)
	}
	if isClosed(r2.Acquired) {
		t.Fatal("R's second reader granted beside I's writer")
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, r2)
	if err := r2.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
