package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/holdfast/holdfast/internal/redissontest"
	"github.com/holdfast/holdfast/internal/redistest"
)

// TestStatusRedissonFair: status --layout redisson shows an RFairLock a
// Java process holds as a fair lock, with the waiters in its line, and
// force-unlock frees it.
func TestStatusRedissonFair(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	java := redissontest.New(srv.Client(t), "java-ops")
	defer java.Close()
	if err := java.FairLock(ctx, "exports", 1, -1); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := java.FairTryAcquire(ctx, "exports", 2, 0, -1); ok || err != nil {
		t.Fatalf("second Java thread: %v, %v", ok, err)
	}
	r := runHoldfast(t, "status", "--layout", "redisson", "--json", "--redis", srv.Addr, "exports")
	var out []struct {
		Kind    string `json:"kind"`
		Waiters int    `json:"waiters"`
		Holders []struct {
			Owner string `json:"owner"`
			Count int64  `json:"count"`
		} `json:"holders"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); r.code != 0 || err != nil || len(out) != 1 {
		t.Fatalf("status: exit %d, %v, stdout %q, stderr %q", r.code, err, r.stdout, r.stderr)
	}
	st := out[0]
	if st.Kind != "fair" || st.Waiters != 1 || len(st.Holders) != 1 || st.Holders[0].Owner != "java-ops:1" || st.Holders[0].Count != 1 {
		t.Fatalf("status of a Java RFairLock with one waiter: %+v", st)
	}
	if r := runHoldfast(t, "force-unlock", "--layout", "redisson", "--redis", srv.Addr, "exports"); r.code != 0 {
		t.Fatalf("force-unlock: exit %d, stderr %q", r.code, r.stderr)
	}
	if held, _ := java.IsLocked(ctx, "exports"); held {
		t.Fatal("the Java fair lock is still held after force-unlock")
	}
}
