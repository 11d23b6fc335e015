package holdfast_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
)

// fenceKeys returns the fencing counters in Redis.
func fenceKeys(t *testing.T, srv *redistest.Server) []string {
	var out []string
	for _, k := range srv.Keys(t) {
		if strings.HasSuffix(k, ":fence") {
			out = append(out, k)
		}
	}
	return out
}

// Fence counters are bounded by the hash slots in use, not by the names
// ever locked: names that share a slot share a counter, and each name's
// tokens still increase.
func TestFenceKeysBoundedBySlots(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{})
	last := map[string]uint64{}
	for round := 0; round < 2; round++ {
		for i := 0; i < 200; i++ {
			name := fmt.Sprintf("order}%d", i) // every name's hash tag is "order"
			l := c.Lock(context.Background(), name)
			mustAcquire(t, l)
			if l.Token() <= last[name] {
				t.Fatalf("token %d on %q after %d", l.Token(), name, last[name])
			}
			last[name] = l.Token()
			if err := l.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if keys := fenceKeys(t, srv); len(keys) != 1 || keys[0] != scripts.FenceKey("order}0") {
		t.Fatalf("fence keys after 200 names of one slot: %d (%v…), want the slot's one counter", len(keys), keys[:min(2, len(keys))])
	}
}

// With persistence, tokens keep increasing across a restart of Redis.
func TestFenceMonotoneAcrossPersistentRestart(t *testing.T) {
	srv := redistest.StartPersistent(t)
	c := newClient(t, srv, holdfast.Config{})
	var last uint64
	for round := 0; round < 3; round++ {
		for i := 0; i < 3; i++ {
			l := c.Lock(context.Background(), "persisted")
			mustAcquire(t, l)
			if l.Token() <= last {
				t.Fatalf("round %d: token %d after %d", round, l.Token(), last)
			}
			last = l.Token()
			l.Release(context.Background())
		}
		srv.Restart()
	}
}
