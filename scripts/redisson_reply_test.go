package scripts_test

import (
	"testing"

	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
)

// TestRedissonFreshGrantAnswersItsToken: under the Redisson layout a fresh
// grant answers its token alone, as acquire.lua does (no reply table for the
// server to build and the client to read), and every other grant the table:
// a repeat, a reentry, and a fresh grant whose token is not positive (a
// counter set by hand).
func TestRedissonFreshGrantAnswersItsToken(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	const name = "orders:7"
	keys := scripts.RedissonAcquireKeys(name)
	field := scripts.RedissonField("client-1", "", 1)
	acquire := func(expected int64) []int64 {
		t.Helper()
		return run(t, c, scripts.RedissonAcquire, keys, scripts.RedissonAcquireArgs(field, 10_000_000_000, expected)...)
	}
	release := func(expected int64) []int64 {
		t.Helper()
		return run(t, c, scripts.RedissonRelease, scripts.RedissonReleaseKeys(name), scripts.RedissonReleaseArgs(field, expected)...)
	}

	got := acquire(0)
	if len(got) != 1 || got[0] < 1 {
		t.Fatalf("fresh grant answered %v, want its token alone", got)
	}
	token := got[0]
	if again := acquire(0); len(again) != 3 || again[0] != 1 || again[1] != 1 || again[2] != token {
		t.Fatalf("repeat of the fresh grant answered %v, want {1 1 %d}", again, token)
	}
	if nested := acquire(1); len(nested) != 3 || nested[0] != 1 || nested[1] != 2 {
		t.Fatalf("reentry answered %v, want {1 2 token}", nested)
	}
	if got := release(2); len(got) != 1 || got[0] != 1 {
		t.Fatalf("inner release answered %v, want 1", got)
	}
	if got := release(1); len(got) != 1 || got[0] != 0 {
		t.Fatalf("final release answered %v, want 0", got)
	}

	// A counter set below zero by hand: the fresh grant's token is not
	// positive, and the short reply (positive by definition) cannot carry it.
	srv.Do(t, "SET", scripts.RedissonTokenKey(name), "-5")
	if got := acquire(0); len(got) != 3 || got[0] != 1 || got[1] != 1 || got[2] != -4 {
		t.Fatalf("fresh grant of token -4 answered %v, want {1 1 -4}", got)
	}
}
