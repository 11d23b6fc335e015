package keyslot

import "testing"

// The slots Redis itself gives (CLUSTER KEYSLOT) for keys with and without
// hash tags.
func TestOf(t *testing.T) {
	for key, want := range map[string]uint16{
		"":                     0,
		"123456789":            12739, // the CRC16/XMODEM check value 0x31C3, mod 16384
		"foo":                  12182,
		"{user1000}.following": 3443,
		"user1000":             3443,
		"foo{}{bar}":           8363, // an empty tag: the whole key counts
		"{}foo":                9500,
		"holdfast:{a}:ch":      15495,
		"a":                    15495,
	} {
		if got := Of(key); got != want {
			t.Errorf("Of(%q) = %d, want %d", key, got, want)
		}
	}
}
