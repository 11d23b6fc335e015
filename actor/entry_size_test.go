package actor

import (
	"testing"
	"unsafe"
)

// TestEntrySize: a registry entry, with the sleeping record it embeds, is
// at most 128 bytes, a Go size class: each quiet hold keeps one
// (docs/architecture.md, "Memory per hold").
func TestEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n > 128 {
		t.Fatalf("an entry is %d bytes, want at most 128", n)
	}
}
