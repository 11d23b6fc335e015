package renewal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/holdfast/holdfast/scripts"
)

// TestExecMultiSendsManyGroupsTogether: with ExecMulti and a Group, the
// calls of many groups go out together, at most MaxCalls per ExecMulti; no
// call spans groups, and each call's outcome reaches its own items.
func TestExecMultiSendsManyGroupsTogether(t *testing.T) {
	f := &fakeRedis{gone: map[string]bool{}}
	var mu sync.Mutex
	var multis [][]scripts.Call
	var flushes []func()
	b := New(Config{
		Clock: clock.NewMock(),
		After: func(_ time.Duration, fn func()) { flushes = append(flushes, fn) },
		Exec: func(context.Context, *scripts.Script, []string, []string) ([]bool, error) {
			return nil, errors.New("Exec used with ExecMulti set")
		},
		ExecMulti: func(ctx context.Context, calls []scripts.Call) ([][]bool, []error) {
			mu.Lock()
			kept := make([]scripts.Call, len(calls)) // calls are the round's until ExecMulti returns
			for i, c := range calls {
				kept[i] = scripts.Call{Script: c.Script, Keys: slices.Clone(c.Keys), Args: slices.Clone(c.Args)}
			}
			multis = append(multis, kept)
			mu.Unlock()
			out := make([][]bool, len(calls))
			errs := make([]error, len(calls))
			for i, c := range calls {
				if c.Keys[0] == "g7:0" {
					errs[i] = errors.New("MOVED")
					continue
				}
				out[i], errs[i] = f.exec(ctx, c.Script, c.Keys, c.Args)
			}
			return out, errs
		},
		Group:    func(key string) uint16 { var g uint16; fmt.Sscanf(key, "g%d:", &g); return g },
		MaxBatch: 2,
		MaxCalls: 4,
	})
	defer b.Close()
	results := map[string]outcome{}
	var rmu sync.Mutex
	var wg sync.WaitGroup
	// 10 groups of 3 keys: 2 calls per group (MaxBatch 2), 20 calls, so
	// 5 ExecMulti of 4 calls.
	for g := range 10 {
		for k := range 3 {
			add(b, fmt.Sprintf("g%d:%d", g, k), results, &rmu, &wg)
		}
	}
	f.gone["g3:1"] = true
	flushes[0]()
	wg.Wait()
	if len(multis) != 5 {
		t.Fatalf("%d ExecMulti, want 5", len(multis))
	}
	for _, calls := range multis {
		if len(calls) > 4 {
			t.Fatalf("ExecMulti of %d calls, more than MaxCalls 4", len(calls))
		}
		for _, c := range calls {
			for _, k := range c.Keys {
				if k[:3] != c.Keys[0][:3] {
					t.Fatalf("one call spans groups: %v", c.Keys)
				}
			}
		}
	}
	for k, r := range results {
		switch {
		case k == "g7:0" || (k == "g7:1" && results["g7:0"].err != nil && sameCall(multis, "g7:0", "g7:1")):
			if r.err == nil {
				t.Fatalf("%s: the call's error did not reach it", k)
			}
		case r.err != nil:
			t.Fatalf("%s: %v", k, r.err)
		case r.renewed == (k == "g3:1"):
			t.Fatalf("%s: renewed %v", k, r.renewed)
		}
	}
}

func sameCall(multis [][]scripts.Call, a, b string) bool {
	for _, calls := range multis {
		for _, c := range calls {
			var hasA, hasB bool
			for _, k := range c.Keys {
				hasA = hasA || k == a
				hasB = hasB || k == b
			}
			if hasA && hasB {
				return true
			}
		}
	}
	return false
}
