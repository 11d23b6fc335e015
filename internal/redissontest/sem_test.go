package redissontest

import (
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/holdfast/holdfast/internal/redistest"
)

// TestPermitExpirableSemaphore: the client's RPermitExpirableSemaphore as
// Redisson behaves: trySetPermits once; a permit's id is 16 bytes in the
// lease records, scored with its lease's end; a waiter takes a permit whose
// lease ended, at that end; a release wakes a waiter of another client at
// once; a release of a permit that is not held is refused.
func TestPermitExpirableSemaphore(t *testing.T) {
	s := redistest.Start(t)
	ctx := ctxFor(t)
	a := newClient(t, s, idA)
	b := newClient(t, s, idB)
	if ok, err := a.TrySetPermits(ctx, "sem", 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := b.TrySetPermits(ctx, "sem", 5); ok || err != nil {
		t.Fatalf("second trySetPermits: %v, %v", ok, err)
	}
	before := time.Now()
	id, ok, err := a.TryAcquirePermit(ctx, "sem", 0, 500)
	if !ok || err != nil || len(id) != 32 {
		t.Fatalf("tryAcquire: %q, %v, %v", id, ok, err)
	}
	raw, _ := hex.DecodeString(id)
	if end, err := s.Do(t, "ZSCORE", SemTimeoutKey("sem"), string(raw)).AsFloat64(); err != nil ||
		time.UnixMilli(int64(end)).Sub(before) < 400*time.Millisecond || time.UnixMilli(int64(end)).Sub(before) > 2*time.Second {
		t.Fatalf("lease record of %s ends %v, %v", id, end, err)
	}
	// b waits for a's lease to end (no release is announced).
	id2, ok, err := b.TryAcquirePermit(ctx, "sem", 5000, -1)
	waited := time.Since(before)
	if !ok || err != nil {
		t.Fatalf("b never took the ended permit: %v", err)
	}
	if waited < 400*time.Millisecond || waited > 3*time.Second {
		t.Fatalf("b took the permit %v after a's grant; its lease was 500ms", waited)
	}
	var iae *IllegalArgumentError
	if err := a.ReleasePermit(ctx, "sem", id); !errors.As(err, &iae) {
		t.Fatalf("release of an ended permit: %v", err)
	}

	got := make(chan time.Time, 1)
	go func() {
		if _, err := a.AcquirePermit(ctx, "sem", 10000); err != nil {
			t.Error(err)
		}
		got <- time.Now()
	}()
	for {
		n, _ := s.Do(t, "PUBSUB", "NUMSUB", SemChannel("sem")).ToArray()
		if len(n) == 2 {
			if c, _ := n[1].AsInt64(); c > 0 {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	released := time.Now()
	if err := b.ReleasePermit(ctx, "sem", id2); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-got:
		if d := at.Sub(released); d > 2*time.Second {
			t.Fatalf("a woken %v after b's release", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a never woken")
	}
	if n, err := a.AvailablePermits(ctx, "sem"); n != 0 || err != nil {
		t.Fatalf("availablePermits %d, %v", n, err)
	}
}
