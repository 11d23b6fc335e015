package scripts_test

import (
	"context"
	"strings"
	"testing"

	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
)

// TestFairHeadTakesGrantBehindIt: Redis holds a client's places out of its
// local order (w's place reached the queue before h's), and the release
// grants w. The head h takes that grant when its take lists w as queued
// behind it, and w goes back to the front of the queue, ahead of the other
// client's waiter; a take that does not list w leaves the grant alone.
func TestFairHeadTakesGrantBehindIt(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	const name = "fq"
	keys := scripts.GrantKeys(name, scripts.FairQueueKey(name))
	ch := scripts.ClientChannel(name, "")
	take := func(field string, behind ...string) []int64 {
		args := append([]string{field, "10000", "0", "5000", "take", ch}, behind...)
		return run(t, c, scripts.FairAcquireScript.Src, keys, args...)
	}
	place := func(field string) []int64 {
		return run(t, c, scripts.FairAcquireScript.Src, keys, field, "10000", "0", "5000", "place", ch)
	}
	release := func(field string) []int64 {
		return run(t, c, scripts.FairReleaseScript.Src, keys, field, "1", "5000", ch)
	}
	hget := func(key, field string) string {
		v, err := c.Do(context.Background(), c.B().Hget().Key(key).Field(field).Build()).ToString()
		if err != nil {
			return ""
		}
		return v
	}
	expect := func(desc string, got []int64, want ...int64) {
		t.Helper()
		if len(got) < len(want) {
			t.Fatalf("%s: got %v, want %v", desc, got, want)
		}
		for i, w := range want {
			if got[i] != w {
				t.Fatalf("%s: got %v, want %v", desc, got, want)
			}
		}
	}

	expect("the holder takes the free lock", take("d:1:a"), 1, 1)
	expect("w's place reaches Redis first", place("c:1:w"), 0)
	expect("then h's", place("c:1:h"), 0)
	expect("another client's waiter queues after them", take("d:1:z"), 0)
	expect("the release grants the longest waiter", release("d:1:a"), 0)
	if got := hget(scripts.LockKey(name), "c:1:w"); got != "0" {
		t.Fatalf("w's grant: count %q, want 0", got)
	}
	expect("a take that does not list w leaves its grant", take("c:1:h"), 0)
	expect("another client cannot take it, even listing it", take("d:1:z", "c:1:w"), 0)
	expect("the head takes the grant to w, queued behind it", take("c:1:h", "c:1:w"), 1, 1)
	if got := hget(scripts.LockKey(name), "c:1:w"); got != "" {
		t.Fatalf("w still granted (count %q) after the head took its grant", got)
	}
	if got := hget(scripts.FairQueueKey(name), "c:1:w"); !strings.HasPrefix(got, "0:") {
		t.Fatalf("w's place after the head took its grant: %q, want the front (0:DEADLINE)", got)
	}
	expect("repeating the head's take answers the same", take("c:1:h", "c:1:w"), 1, 1)
	expect("the head's release", release("c:1:h"), 0)
	if got := hget(scripts.LockKey(name), "c:1:w"); got != "0" {
		t.Fatalf("after the head's release w's count is %q, want 0 (granted before d:1:z)", got)
	}
}

// TestFairGrantWaitsForTheWaitersOwnTimeout: a grant made by a release with
// a short WaiterTimeout (300 ms) to a waiter whose own is long (3 s) waits
// for that waiter as long as its place would have, not 300 ms. The waiter
// may have missed the grant's message, and it learns of the grant at its
// next keep-alive, a third of its own WaiterTimeout after the last; a grant
// gone by then would pass the lock to a waiter that asked later.
func TestFairGrantWaitsForTheWaitersOwnTimeout(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	const name = "fw"
	keys := scripts.GrantKeys(name, scripts.FairQueueKey(name))
	ch := scripts.ClientChannel(name, "")
	if got := run(t, c, scripts.FairAcquireScript.Src, keys, "d:1:a", "10000", "0", "300", "take", ch); got[0] != 1 {
		t.Fatalf("the holder's take answered %v", got)
	}
	if got := run(t, c, scripts.FairAcquireScript.Src, keys, "c:1:w", "10000", "0", "3000", "place", ch); got[0] != 0 {
		t.Fatalf("the waiter's place answered %v", got)
	}
	if got := run(t, c, scripts.FairReleaseScript.Src, keys, "d:1:a", "1", "300", ch); got[0] != 0 {
		t.Fatalf("the release answered %v", got)
	}
	if v, _ := c.Do(context.Background(), c.B().Hget().Key(scripts.LockKey(name)).Field("c:1:w").Build()).ToString(); v != "0" {
		t.Fatalf("the waiter's grant: count %q, want 0", v)
	}
	pttl, err := c.Do(context.Background(), c.B().Pttl().Key(scripts.LockKey(name)).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	if pttl <= 1000 {
		t.Fatalf("the grant lives %d ms: the releaser's 300 ms, not the waiter's own place time (about 3000)", pttl)
	}
}
