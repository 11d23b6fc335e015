package renewal

import (
	"fmt"
	"sync"
	"testing"
)

// A round's slices are kept for the next round up to MaxSpare items; a
// larger round's are left to the collector, so a burst does not stay in
// the Batcher's memory.
func TestSpareSlicesAreBounded(t *testing.T) {
	for _, tc := range []struct {
		n    int
		kept bool
	}{{MaxSpare / 2, true}, {MaxSpare, true}, {MaxSpare + 1, false}, {4 * MaxSpare, false}} {
		b, _, flushes, _ := setup(nil)
		results := map[string]outcome{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range tc.n {
			add(b, fmt.Sprintf("k%d", i), results, &mu, &wg)
		}
		(*flushes)[0]()
		wg.Wait()
		b.Close() // waits for the round, which keeps its slices last
		b.mu.Lock()
		items, buf := cap(b.spareItems), b.spareBuf
		b.mu.Unlock()
		keys := 0
		if buf != nil {
			keys = cap(buf.keys)
		}
		if len(results) != tc.n {
			t.Fatalf("%d items: %d results", tc.n, len(results))
		}
		if kept := items >= tc.n && keys >= tc.n; kept != tc.kept {
			t.Errorf("round of %d items: spares of %d items and %d keys; kept %v, want %v", tc.n, items, keys, kept, tc.kept)
		}
		if items > MaxSpare || keys > MaxSpare {
			t.Errorf("round of %d items: spares of %d items and %d keys kept, want at most %d", tc.n, items, keys, MaxSpare)
		}
	}
}
