package scripts_test

import (
	"testing"

	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
)

// TestFenceRaiseOnRealRedis: the counter is raised to the floor, never
// lowered, and the next grant returns more than the floor.
func TestFenceRaiseOnRealRedis(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	fence := scripts.GrantKeys("n")
	for _, tc := range []struct {
		floor string
		want  int64
	}{
		{"5", 5},   // absent counter: raised to the floor
		{"3", 5},   // never lowered
		{"5", 5},   // repeated: idempotent
		{"40", 40}, // raised again
	} {
		if got := run(t, c, scripts.FenceRaise, fence, tc.floor); got[0] != tc.want {
			t.Fatalf("raise to %s: counter %d, want %d", tc.floor, got[0], tc.want)
		}
	}
	got := run(t, c, scripts.Acquire, scripts.GrantKeys("n", scripts.FairQueueKey("n")), "c:o", "10000", "0")
	if len(got) != 1 || got[0] != 41 { // a fresh grant's short reply: its token
		t.Fatalf("acquire after raising to 40: %v, want token 41", got)
	}
}
