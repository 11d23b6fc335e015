package scripts_test

import (
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast/scripts"
)

func electAcq(name, owner string, expected int64) func() ([]string, []string) {
	return func() ([]string, []string) {
		return scripts.ElectAcquireCall(name, owner+":i:o", 10*time.Second, expected, "value of "+owner)
	}
}

func electRel(name, owner string, expected int64) func() ([]string, []string) {
	return func() ([]string, []string) { return scripts.ElectReleaseCall(name, owner+":i:o", expected) }
}

func electRenew(name, owner string) func() ([]string, []string) {
	return func() ([]string, []string) {
		return []string{scripts.LockKey(name)}, []string{owner + ":i:o", "10000"}
	}
}

// TestElectScripts walks the election's scripts through the rules their
// headers document, on a real server and on the simulator's node: one
// leader at a time, idempotent grants and releases, reentry, terms from the
// fence counter, a message on every grant and resignation and none
// otherwise, and every key of another kind refused — a hash marked with
// another kind, a fair queue, and a key that is not a hash at all.
func TestElectScripts(t *testing.T) {
	A, R, N := scripts.ElectAcquire, scripts.ElectRelease, scripts.ElectRenew
	for _, b := range rwBackends(t) {
		b.walk(t, []rwStep{
			{desc: "a campaigns on a free name", src: A, call: electAcq("e", "a", 0), want: []int64{1, 1, 1}, pub: 1},
			{desc: "a repeat of the grant answers it again", src: A, call: electAcq("e", "a", 0), want: []int64{1, 1, 1}},
			{desc: "b waits while a leads", src: A, call: electAcq("e", "b", 0), want: []int64{0, pttl}},
			{desc: "a re-enters", src: A, call: electAcq("e", "a", 1), want: []int64{1, 2, 1}},
			{desc: "a repeat of the reentry", src: A, call: electAcq("e", "a", 1), want: []int64{1, 2, 1}},
			{desc: "a count a does not hold", src: A, call: electAcq("e", "a", 5), want: []int64{-1, 2}},
			{desc: "the leader renews", src: N, call: electRenew("e", "a"), want: []int64{1}},
			{desc: "a candidate does not", src: N, call: electRenew("e", "b"), want: []int64{0}},
			{desc: "a leaves its reentry", src: R, call: electRel("e", "a", 2), want: []int64{1}},
			{desc: "a repeat of that release", src: R, call: electRel("e", "a", 2), want: []int64{1}},
			{desc: "a release of a count a does not hold", src: R, call: electRel("e", "a", 5), want: []int64{-2}},
			{desc: "b does not lead", src: R, call: electRel("e", "b", 0), want: []int64{-1}},
			{desc: "a resigns", src: R, call: electRel("e", "a", 1), want: []int64{0}, pub: 1},
			{desc: "a repeat of the resignation", src: R, call: electRel("e", "a", 1), want: []int64{-1}},
			{desc: "a's renewal after it resigned", src: N, call: electRenew("e", "a"), want: []int64{0}},
			{desc: "b leads, with the next term", src: A, call: electAcq("e", "b", 0), want: []int64{1, 1, 2}, pub: 1},
			{desc: "a's reentry after it resigned", src: A, call: electAcq("e", "a", 1), want: []int64{-1, 0}},
			{desc: "b resigns whatever its count", src: R, call: electRel("e", "b", 0), want: []int64{0}, pub: 1},
		})
		b.do(t, "SET", scripts.LockKey("str"), "x")
		b.do(t, "HSET", scripts.LockKey("rw"), "kind", "rw")
		b.do(t, "HSET", scripts.FairQueueKey("q"), "someone", "1")
		b.walk(t, []rwStep{
			{desc: "a string at the name's key", src: A, call: electAcq("str", "a", 0), want: []int64{-2}},
			{desc: "renewal on a string", src: N, call: electRenew("str", "a"), want: []int64{0}},
			{desc: "release on a string", src: R, call: electRel("str", "a", 0), want: []int64{-1}},
			{desc: "a hash of another kind", src: A, call: electAcq("rw", "a", 0), want: []int64{-2}},
			{desc: "a fair queue", src: A, call: electAcq("q", "a", 0), want: []int64{-2}},
		})
	}
}

// TestElectShardedVariants: each election script that publishes has a
// sharded variant that publishes with SPUBLISH only (the registered ones
// are covered by TestShardedVariants; ForceUnlock is an operator's tool).
func TestElectShardedVariants(t *testing.T) {
	for name, src := range map[string]string{"acquire": scripts.ElectAcquire, "release": scripts.ElectRelease,
		"force_unlock": scripts.ElectForceUnlock} {
		sh := scripts.Sharded(src)
		if strings.Contains(sh, "'publish'") || strings.Count(sh, "redis.call('spublish', ") != 1 {
			t.Fatalf("elect %s: sharded variant does not publish once with SPUBLISH", name)
		}
	}
}
