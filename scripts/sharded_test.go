package scripts

import (
	"strings"
	"testing"
)

// TestShardedVariants: every script that publishes does it in the one form
// Sharded rewrites, and its sharded variant publishes only with SPUBLISH.
func TestShardedVariants(t *testing.T) {
	publishing := 0
	tools := []*Script{{Name: "force_unlock", Src: ForceUnlock}, {Name: "fair_force_unlock", Src: FairForceUnlock},
		{Name: "rw_force_unlock", Src: RWForceUnlock}}
	for _, s := range append(All(), tools...) {
		lower := strings.ToLower(s.Src)
		n := strings.Count(lower, "'publish'") + strings.Count(lower, "\"publish\"")
		if n != strings.Count(s.Src, publishCall) {
			t.Fatalf("%s publishes in a form Sharded does not rewrite (use %q)", s.Name, publishCall)
		}
		sh := Sharded(s.Src)
		if strings.Contains(strings.ToLower(sh), "'publish'") {
			t.Fatalf("%s: sharded variant still PUBLISHes", s.Name)
		}
		if got := strings.Count(sh, "redis.call('spublish', "); got != n {
			t.Fatalf("%s: %d SPUBLISH in the sharded variant, want %d", s.Name, got, n)
		}
		if n > 0 {
			publishing++
		}
	}
	if publishing == 0 {
		t.Fatal("no script publishes; the test checks nothing")
	}
	if Sharded(Release) == Release {
		t.Fatal("the release script has no sharded variant")
	}
}
