package holdfast

import (
	"testing"
	"unsafe"
)

// TestLockSize holds the Lock to its size class: a client may hold a
// hundred thousand (docs/architecture.md, "Memory per hold"). A field added
// to the Lock belongs in lockExtra unless every Lock needs it.
func TestLockSize(t *testing.T) {
	if n := unsafe.Sizeof(Lock{}); n > 96 {
		t.Errorf("Lock is %d bytes, want at most 96", n)
	}
	if n := unsafe.Sizeof(lockExtra{}); n > 64 {
		t.Errorf("lockExtra is %d bytes, want at most 64", n)
	}
}
