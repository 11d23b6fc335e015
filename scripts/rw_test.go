package scripts_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
	"github.com/holdfast/holdfast/sim"
)

// rwBackend runs the read-write scripts on a real server or on a simulated
// node, so that one walk-through checks both (the simulator must run the
// scripts exactly as Redis does).
type rwBackend struct {
	name string
	eval func(t *testing.T, src string, keys, args []string) []int64
	do   func(t *testing.T, args ...string) int64
	// pass lets d of the backend's time go by.
	pass func(d time.Duration)
	// published counts the messages published so far (-1: not counted).
	published func() int
}

func rwBackends(t *testing.T) []rwBackend {
	srv := redistest.Start(t)
	c := srv.Client(t)
	real := rwBackend{
		name: "redis",
		eval: func(t *testing.T, src string, keys, args []string) []int64 {
			return run(t, c, src, keys, args...)
		},
		do: func(t *testing.T, args ...string) int64 {
			v, err := c.Do(context.Background(), c.B().Arbitrary(args...).Build()).AsInt64()
			if err != nil && !rueidis.IsRedisNil(err) && args[0] != "SET" {
				t.Fatalf("%v: %v", args, err)
			}
			return v
		},
		pass:      time.Sleep,
		published: func() int { return -1 },
	}
	now := time.Unix(1_700_000_000, 0)
	node := sim.NewNode(func() time.Time { return now })
	pubs := 0
	node.OnPublish = func(string, string) int64 { pubs++; return 0 }
	simulated := rwBackend{
		name: "sim",
		eval: func(t *testing.T, src string, keys, args []string) []int64 {
			t.Helper()
			r := node.Eval(src, keys, args)
			if r.IsError() {
				t.Fatalf("script error: %v", r)
			}
			if r.Kind == sim.ReplyInt {
				return []int64{r.Int}
			}
			out := make([]int64, len(r.Array))
			for i, x := range r.Array {
				out[i] = x.Int
			}
			return out
		},
		do: func(t *testing.T, args ...string) int64 {
			r := node.Do(args...)
			if r.IsError() {
				t.Fatalf("%v: %v", args, r)
			}
			if r.Kind == sim.ReplyBulk {
				n, _ := strconv.ParseInt(r.Str, 10, 64)
				return n
			}
			return r.Int
		},
		pass:      func(d time.Duration) { now = now.Add(d) },
		published: func() int { return pubs },
	}
	return []rwBackend{real, simulated}
}

type rwStep struct {
	desc string
	src  string
	call func() (keys, args []string)
	want []int64 // pttl stands for any remaining TTL in (0, max]
	max  int64
	// pub is how many messages the step publishes (checked where counted).
	pub int
}

func acq(name, owner string, m scripts.RWMode, lease, expected, claim int64) func() ([]string, []string) {
	return func() ([]string, []string) {
		return scripts.RWAcquireCall(name, scripts.RWField(m, owner+":i:o"), time.Duration(lease)*time.Millisecond,
			expected, time.Duration(claim)*time.Millisecond)
	}
}

func rel(name, owner string, m scripts.RWMode, expected int64) func() ([]string, []string) {
	return func() ([]string, []string) {
		return scripts.RWReleaseCall(name, scripts.RWField(m, owner+":i:o"), expected)
	}
}

func (b rwBackend) walk(t *testing.T, steps []rwStep) {
	t.Helper()
	for _, s := range steps {
		before := b.published()
		keys, args := s.call()
		got := b.eval(t, s.src, keys, args)
		max := s.max
		if max == 0 {
			max = 10000
		}
		if i := slices.Index(s.want, pttl); i >= 0 && len(got) == len(s.want) && got[i] > 0 && got[i] <= max {
			got[i] = pttl
		}
		if !slices.Equal(got, s.want) {
			t.Fatalf("%s: %s: got %v, want %v", b.name, s.desc, got, s.want)
		}
		if before >= 0 && b.published()-before != s.pub {
			t.Fatalf("%s: %s: published %d messages, want %d", b.name, s.desc, b.published()-before, s.pub)
		}
	}
}

// TestRWScripts walks the read-write scripts through the rules their headers
// document, on a real server and on the simulator's node.
func TestRWScripts(t *testing.T) {
	const r, w = scripts.RWRead, scripts.RWWrite
	A, R := scripts.RWAcquire, scripts.RWRelease
	for _, b := range rwBackends(t) {
		steps := []rwStep{
			{desc: "first reader", src: A, call: acq("n", "a", r, 10000, 0, 3000), want: []int64{1, 1, 1}},
			{desc: "repeat of the grant takes a new token (nobody uses the first)", src: A, call: acq("n", "a", r, 10000, 0, 3000), want: []int64{1, 1, 2}},
			{desc: "second reader shares", src: A, call: acq("n", "b", r, 10000, 0, 3000), want: []int64{1, 1, 3}},
			{desc: "reader reentry keeps its token", src: A, call: acq("n", "a", r, 10000, 1, 3000), want: []int64{1, 2, 2}},
			{desc: "writer waits and leaves a claim", src: A, call: acq("n", "w", w, 10000, 0, 3000), want: []int64{0, pttl}},
			{desc: "writer retry renews its claim", src: A, call: acq("n", "w", w, 10000, 0, 3000), want: []int64{0, pttl}},
			{desc: "new reader queues behind the claim, sleeps at most its lease", src: A, call: acq("n", "c", r, 10000, 0, 3000), want: []int64{0, pttl}, max: 3000},
			{desc: "a reader of the waiting writer's own client is not held back (its local queue orders them)", src: A, call: func() ([]string, []string) {
				return scripts.RWAcquireCall("n", scripts.RWField(r, "w:i:other"), 10*time.Second, 0, 0)
			}, want: []int64{1, 1, 4}},
			{desc: "which leaves", src: R, call: func() ([]string, []string) {
				return scripts.RWReleaseCall("n", scripts.RWField(r, "w:i:other"), 1)
			}, want: []int64{0}},
			{desc: "existing reader re-enters despite the claim", src: A, call: acq("n", "b", r, 10000, 1, 3000), want: []int64{1, 2, 3}},
			{desc: "read to write would deadlock", src: A, call: acq("n", "a", w, 10000, 0, 3000), want: []int64{-3}},
			{desc: "count mismatch", src: A, call: acq("n", "a", r, 10000, 5, 3000), want: []int64{-1, 2}},
			{desc: "release by a stranger", src: R, call: rel("n", "x", r, 1), want: []int64{-1}},
			{desc: "release mismatch", src: R, call: rel("n", "a", r, 5), want: []int64{-2}},
			{desc: "release inner read", src: R, call: rel("n", "a", r, 2), want: []int64{1}},
			{desc: "repeat of inner release", src: R, call: rel("n", "a", r, 2), want: []int64{1}},
			{desc: "a reader leaves, another stays: no message", src: R, call: rel("n", "a", r, 1), want: []int64{0}},
			{desc: "repeat of final release", src: R, call: rel("n", "a", r, 1), want: []int64{-1}},
			{desc: "b inner", src: R, call: rel("n", "b", r, 2), want: []int64{1}},
			{desc: "last reader leaves: one message", src: R, call: rel("n", "b", r, 1), want: []int64{0}, pub: 1},
			{desc: "waiting writer granted, next token", src: A, call: acq("n", "w", w, 10000, 0, 3000), want: []int64{1, 1, 5}},
			{desc: "reader waits for the writer", src: A, call: acq("n", "c", r, 10000, 0, 3000), want: []int64{0, pttl}},
			{desc: "other writer waits", src: A, call: acq("n", "v", w, 10000, 0, 0), want: []int64{0, pttl}},
			{desc: "write to read is allowed", src: A, call: acq("n", "w", r, 10000, 0, 3000), want: []int64{1, 1, 6}},
			{desc: "write reentry keeps its token", src: A, call: acq("n", "w", w, 10000, 1, 3000), want: []int64{1, 2, 5}},
			{desc: "write inner release", src: R, call: rel("n", "w", w, 2), want: []int64{1}},
			{desc: "writer leaves, its read stays: one message", src: R, call: rel("n", "w", w, 1), want: []int64{0}, pub: 1},
			{desc: "waiting reader now shares with the former writer", src: A, call: acq("n", "c", r, 10000, 0, 3000), want: []int64{1, 1, 7}},
			{desc: "w's read ends", src: R, call: rel("n", "w", r, 1), want: []int64{0}},
			{desc: "c abandons its read", src: R, call: rel("n", "c", r, 0), want: []int64{0}, pub: 1},
			{desc: "writer on a free name, no claim left behind by v", src: A, call: acq("n", "v", w, 10000, 0, 0), want: []int64{1, 1, 8}},
			{desc: "writer leaves", src: R, call: rel("n", "v", w, 1), want: []int64{0}, pub: 1},
		}
		b.walk(t, steps)
		if n := b.do(t, "EXISTS", scripts.LockKey("n")); n != 0 {
			t.Fatalf("%s: lock hash left behind", b.name)
		}
		// Kinds do not mix: a reentrant lock's key refuses the rw scripts.
		keys := scripts.GrantKeys("p", scripts.FairQueueKey("p"))
		b.eval(t, scripts.Acquire, keys, []string{"c:a", "10000", "0"})
		b.walk(t, []rwStep{
			{desc: "reader on a reentrant lock", src: A, call: acq("p", "b", r, 10000, 0, 3000), want: []int64{-2}},
			{desc: "writer on a reentrant lock", src: A, call: acq("p", "b", w, 10000, 0, 3000), want: []int64{-2}},
			{desc: "release on a reentrant lock", src: R, call: rel("p", "a", w, 0), want: []int64{-1}},
		})
		// A name with fair waiters queued (its queue key exists) refuses too.
		b.do(t, "SET", scripts.FairQueueKey("q"), "x")
		b.walk(t, []rwStep{{desc: "reader on a fair queue", src: A, call: acq("q", "b", r, 10000, 0, 3000), want: []int64{-2}}})
		count := "return tonumber(string.match(redis.call('get', KEYS[1]), '^w?(%d+):'))"
		if n := b.eval(t, count, []string{scripts.LockKey("p")}, nil); len(n) != 1 || n[0] != 1 {
			t.Fatalf("%s: rw release touched a reentrant lock's hold (count %d)", b.name, n)
		}
	}
}

// TestRWLeasesAreOwn checks that each read hold ends on its own deadline,
// that renewing one reader never extends another, that the hash lives as
// long as its longest live hold, and that a dead writer's claim stops
// blocking readers once its claim lease runs out.
func TestRWLeasesAreOwn(t *testing.T) {
	const r, w = scripts.RWRead, scripts.RWWrite
	A, R := scripts.RWAcquire, scripts.RWRelease
	renew := func(b rwBackend, owner string, lease int64) int64 {
		got := b.eval(t, scripts.RWRenew, []string{scripts.LockKey("n")},
			[]string{scripts.RWField(r, owner+":i:o"), strconv.FormatInt(lease, 10)})
		return got[0]
	}
	for _, b := range rwBackends(t) {
		b.walk(t, []rwStep{
			{desc: "short reader", src: A, call: acq("n", "a", r, 300, 0, 0), want: []int64{1, 1, 1}},
			{desc: "long reader", src: A, call: acq("n", "b", r, 1000, 0, 0), want: []int64{1, 1, 2}},
		})
		for range 4 {
			b.pass(100 * time.Millisecond)
			if renew(b, "b", 1000) != 1 {
				t.Fatalf("%s: live reader's renewal failed", b.name)
			}
		}
		if got := renew(b, "a", 300); got != 0 {
			t.Fatalf("%s: a crashed reader's hold was renewed after its lease (%d)", b.name, got)
		}
		b.walk(t, []rwStep{
			{desc: "the crashed reader's hold is gone", src: A, call: acq("n", "a", r, 300, 1, 0), want: []int64{-1, 0}},
			{desc: "a writer waits only for the live reader", src: A, call: acq("n", "w", w, 1000, 0, 300), want: []int64{0, pttl}, max: 1000},
		})
		if ttl := b.do(t, "PTTL", scripts.LockKey("n")); ttl < 800 || ttl > 1000 {
			t.Fatalf("%s: hash PTTL %d, want the live reader's lease (~1000)", b.name, ttl)
		}
		// The writer dies with its claim: after the claim lease, new readers go.
		b.walk(t, []rwStep{{desc: "reader behind the claim", src: A, call: acq("n", "c", r, 1000, 0, 0), want: []int64{0, pttl}, max: 1000}})
		b.pass(350 * time.Millisecond)
		b.walk(t, []rwStep{
			{desc: "reader after the claim ran out", src: A, call: acq("n", "c", r, 1000, 0, 0), want: []int64{1, 1, 3}},
			{desc: "b leaves; c stays", src: R, call: rel("n", "b", r, 1), want: []int64{0}},
		})
		if ttl := b.do(t, "PTTL", scripts.LockKey("n")); ttl < 500 || ttl > 1000 {
			t.Fatalf("%s: hash PTTL %d, want c's lease", b.name, ttl)
		}
		// A writer that gives up withdraws its claim at once, and readers
		// blocked by it are told.
		b.walk(t, []rwStep{
			{desc: "writer claims", src: A, call: acq("n", "w", w, 1000, 0, 5000), want: []int64{0, pttl}, max: 1000},
			{desc: "reader queues", src: A, call: acq("n", "d", r, 1000, 0, 0), want: []int64{0, pttl}, max: 5000},
			{desc: "writer gives up (undo of a possible grant)", src: R, call: rel("n", "w", w, 1), want: []int64{-1}, pub: 1},
			{desc: "writer claims again", src: A, call: acq("n", "w", w, 1000, 0, 5000), want: []int64{0, pttl}, max: 1000},
			{desc: "writer gives up (abandon)", src: R, call: rel("n", "w", w, 0), want: []int64{-1}, pub: 1},
			{desc: "reader goes", src: A, call: acq("n", "d", r, 1000, 0, 0), want: []int64{1, 1, 4}},
		})
		b.pass(1100 * time.Millisecond)
		if n := b.do(t, "EXISTS", scripts.LockKey("n")); n != 0 {
			t.Fatalf("%s: lock hash outlived every hold", b.name)
		}
		if n := b.do(t, "EXISTS", scripts.RWLeaseKey("n", scripts.RWField(r, "c:i:o"))); n != 0 {
			t.Fatalf("%s: lease key outlived its lease", b.name)
		}
	}
}

// TestRWClaimKeepAlive: a waiting writer's claim lives while its process
// keeps it alive, and lapses on its own lease when the process stops.
func TestRWClaimKeepAlive(t *testing.T) {
	const r, w = scripts.RWRead, scripts.RWWrite
	A := scripts.RWAcquire
	keep := func(b rwBackend, field string) int64 {
		return b.eval(t, scripts.RWKeepAlive, []string{scripts.LockKey("k")}, []string{field, "300"})[0]
	}
	for _, b := range rwBackends(t) {
		b.walk(t, []rwStep{
			{desc: "reader", src: A, call: acq("k", "a", r, 5000, 0, 0), want: []int64{1, 1, 1}},
			{desc: "writer claims", src: A, call: acq("k", "w", w, 5000, 0, 300), want: []int64{0, pttl}},
		})
		if keep(b, scripts.RWField(w, "x:i:o")) != 0 {
			t.Fatalf("%s: keep-alive of a writer with no claim answered 1", b.name)
		}
		if keep(b, scripts.RWField(r, "y:i:o")) != 1 {
			t.Fatalf("%s: keep-alive of a waiting reader answered 0", b.name)
		}
		for range 5 {
			b.pass(100 * time.Millisecond)
			if keep(b, scripts.RWField(w, "w:i:o")) != 1 {
				t.Fatalf("%s: live claim not kept", b.name)
			}
		}
		b.walk(t, []rwStep{{desc: "kept claim still blocks readers", src: A, call: acq("k", "b", r, 5000, 0, 0), want: []int64{0, pttl}}})
		b.pass(350 * time.Millisecond)
		if keep(b, scripts.RWField(w, "w:i:o")) != 0 {
			t.Fatalf("%s: lapsed claim kept alive", b.name)
		}
		b.walk(t, []rwStep{{desc: "lapsed claim lets readers in", src: A, call: acq("k", "b", r, 5000, 0, 0), want: []int64{1, 1, 2}}})
	}
}
