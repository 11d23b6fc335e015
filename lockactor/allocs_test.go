//go:build !race

// The race detector's instrumentation allocates on its own account, so
// allocation counts are tested without it: scripts/test.sh runs this file's
// tests in a run of their own.

package lockactor

import "testing"

// TestMachineCycleAllocatesNothing: once a cycle has left its owner and
// request to reuse, a cycle of the machine stepped as the actor runtime
// steps it (one effect buffer, reused) allocates nothing.
func TestMachineCycleAllocatesNothing(t *testing.T) {
	d := newDriver(t)
	cycle(t, d, 1, "c:a")
	c := newCycler(t, d)
	if allocs := testing.AllocsPerRun(200, c.cycle); allocs != 0 {
		t.Errorf("a cycle of the machine allocated %.1f times, want none", allocs)
	}
}
