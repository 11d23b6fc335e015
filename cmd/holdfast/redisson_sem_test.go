package main

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/holdfast/holdfast/internal/redissontest"
	"github.com/holdfast/holdfast/internal/redistest"
)

// TestLayoutRedissonSemaphore: under --layout redisson, status shows a
// semaphore a Java process uses with Redisson (its size, the Java permit's
// id), exec --permits takes one of its permits, another --permits is
// refused, and force-unlock gives every permit back.
func TestLayoutRedissonSemaphore(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	java := redissontest.New(srv.Client(t), "java-ops")
	defer java.Close()
	if ok, err := java.TrySetPermits(ctx, "exports", 2); !ok || err != nil {
		t.Fatal(ok, err)
	}
	id, err := java.AcquirePermit(ctx, "exports", -1)
	if err != nil {
		t.Fatal(err)
	}
	r := runHoldfast(t, "status", "--layout", "redisson", "--redis", srv.Addr, "exports")
	if r.code != 0 || !strings.Contains(r.stdout, "semaphore/2") || !strings.Contains(r.stdout, id) {
		t.Fatalf("status --layout redisson of a Java permit %s: exit %d, stdout %q, stderr %q", id, r.code, r.stdout, r.stderr)
	}
	if r := runHoldfast(t, "list", "--layout", "redisson", "--redis", srv.Addr); r.code != 0 || strings.TrimSpace(r.stdout) != "exports" {
		t.Fatalf("list --layout redisson: exit %d, stdout %q", r.code, r.stdout)
	}
	r = runHoldfast(t, "exec", "--layout", "redisson", "--permits", "2", "--redis", srv.Addr, "exports", "--",
		"redis-cli", "-p", strconv.Itoa(srv.Port()), "get", "exports")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "0" {
		t.Fatalf("exec --layout redisson --permits 2: exit %d, free permits seen by CMD %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	want := `holdfast: semaphore "exports" has 2 permits, not --permits 3: every user of a name must give the same --permits` + "\n"
	if r := runHoldfast(t, "exec", "--layout", "redisson", "--permits", "3", "--redis", srv.Addr, "exports", "--", "true"); r.code != exitFailure || r.stderr != want {
		t.Fatalf("exec --permits 3 on a Redisson semaphore of 2: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runHoldfast(t, "force-unlock", "--layout", "redisson", "--redis", srv.Addr, "exports"); r.code != 0 {
		t.Fatalf("force-unlock: exit %d, stderr %q", r.code, r.stderr)
	}
	if n, err := java.AvailablePermits(ctx, "exports"); n != 2 || err != nil {
		t.Fatalf("after force-unlock Java sees %d free permits, %v", n, err)
	}
	if ok, err := java.TryReleasePermit(ctx, "exports", id); ok || err != nil {
		t.Fatalf("Java released its force-unlocked permit: %v, %v", ok, err)
	}
}
