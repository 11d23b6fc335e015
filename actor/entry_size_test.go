package actor

import (
	"testing"
	"unsafe"
)

// TestEntrySize: a registry entry, with the sleeping record it embeds, is
// at most 160 bytes, Go's size class below 176: each quiet hold keeps one
// (issue 41; docs/architecture.md, "Memory per hold").
func TestEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n > 160 {
		t.Fatalf("an entry is %d bytes, want at most 160", n)
	}
}
