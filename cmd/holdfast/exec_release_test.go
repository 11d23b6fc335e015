package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast/internal/redistest"
)

// TestExecReleaseUnconfirmed: CMD stops Redis before it exits, so exec's
// release cannot be confirmed: exec says so on stderr in one line, at once
// rather than after the 60s lease, and exits with CMD's status.
func TestExecReleaseUnconfirmed(t *testing.T) {
	srv := redistest.Start(t)
	script := fmt.Sprintf("redis-cli -p %d shutdown nosave >/dev/null 2>&1; exit 5", srv.Port())
	start := time.Now()
	r := runHoldfast(t, "exec", "--redis", srv.Addr, "--watchdog", "60s", "gone", "--", "sh", "-c", script)
	took := time.Since(start)
	if r.code != 5 {
		t.Fatalf("exit %d, want CMD's 5; stderr %q", r.code, r.stderr)
	}
	want := `holdfast: release of "gone" not confirmed by Redis (`
	if !strings.HasPrefix(r.stderr, want) || !strings.Contains(r.stderr, "the lock stays taken until its lease runs out") ||
		strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Fatalf("stderr %q, want one line starting %q", r.stderr, want)
	}
	if took > 30*time.Second {
		t.Fatalf("exec took %v: it waited for the lease", took)
	}
	t.Logf("exec took %v; stderr %q", took.Round(time.Millisecond), r.stderr)
}
