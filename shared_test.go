package holdfast_test

import (
	"context"
	"testing"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
)

// Clients share one actor runtime per process: closing one ends its own
// Locks and leaves another's held Lock, and its later ones, alone.
func TestCloseOfOneClientLeavesAnotherAlone(t *testing.T) {
	srv := redistest.Start(t)
	c1 := newClient(t, srv, holdfast.Config{})
	c2 := newClient(t, srv, holdfast.Config{})
	ctx := context.Background()
	l1 := c1.Lock(ctx, "one")
	l2 := c2.Lock(ctx, "two")
	mustAcquire(t, l1)
	mustAcquire(t, l2)
	if err := c1.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	mustLose(t, l1, holdfast.ErrClosed)
	select {
	case <-l2.Lost:
		t.Fatalf("the other Client's Lock ended when the first Client closed: %v", l2.Err())
	default:
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatalf("Release on the other Client: %v", err)
	}
	// The name c1 held is free and the other Client still works.
	l3 := c2.Lock(ctx, "one")
	mustAcquire(t, l3)
	if err := l3.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
}
