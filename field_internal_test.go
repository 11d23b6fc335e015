package holdfast

import (
	"math"
	"strconv"
	"testing"

	"github.com/holdfast/holdfast/scripts"
)

// The field of a Lock call without an owner is scripts.Field's with owner
// "~N", and its one allocation is the string itself.
func TestAnonymousFieldIsScriptsField(t *testing.T) {
	for _, n := range []uint64{0, 1, 9, 10, 12345, math.MaxUint64} {
		for _, id := range [][2]string{{"web-3/4121", "0a1b2c3d4e5f"}, {"", ""}} {
			want := scripts.Field(id[0], id[1], "~"+strconv.FormatUint(n, 10))
			if got := anonymousField(id[0], id[1], n); got != want {
				t.Errorf("anonymousField(%q, %q, %d) = %q, want %q", id[0], id[1], n, got, want)
			}
		}
	}
	if a := testing.AllocsPerRun(100, func() { anonymousField("web-3/4121", "0a1b2c3d4e5f", 123456) }); a != 1 {
		t.Errorf("anonymousField allocates %v times, want 1", a)
	}
}
