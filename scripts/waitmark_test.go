package scripts_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
)

// publishes is the number of PUBLISH calls the server has run, scripts'
// included (INFO commandstats).
func publishes(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	info, _ := srv.Do(t, "INFO", "commandstats").ToString()
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_publish:calls="); ok {
			var n int64
			fmt.Sscanf(rest, "%d", &n)
			return n
		}
	}
	return 0
}

// TestReleaseAnnouncesOnlyToWaiters: a final release publishes when a
// refused acquire left the waiter mark, or when the caller says it has
// waiters of its own, and otherwise not; the mark outlives the refused
// waiter's sleep (the holder's PTTL) and then lapses by itself.
func TestReleaseAnnouncesOnlyToWaiters(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	lock, mark, ch := scripts.LockKey("m"), scripts.WaitKey("m"), scripts.Channel("m")
	keys := scripts.GrantKeys("m", scripts.FairQueueKey("m"), mark)
	rkeys := []string{lock, mark}
	step := func(desc string, wantPub int64, f func()) {
		t.Helper()
		before := publishes(t, srv)
		f()
		if got := publishes(t, srv) - before; got != wantPub {
			t.Fatalf("%s: %d PUBLISH, want %d", desc, got, wantPub)
		}
	}

	step("nobody waits", 0, func() {
		run(t, c, scripts.Acquire, keys, "c:a", "10000", "0")
		run(t, c, scripts.Acquire, keys, "c:a", "10000", "1")
		run(t, c, scripts.Release, rkeys, "c:a", "2", ch, "0")
		run(t, c, scripts.Release, rkeys, "c:a", "1", ch, "0")
	})
	if n, _ := srv.Do(t, "EXISTS", mark, lock).AsInt64(); n != 0 {
		t.Fatalf("%d keys left after an uncontended cycle", n)
	}

	step("a refused waiter is announced to", 1, func() {
		run(t, c, scripts.Acquire, keys, "c:a", "10000", "0")
		if got := run(t, c, scripts.Acquire, keys, "c:b", "3000", "0"); len(got) != 2 || got[0] != 0 {
			t.Fatalf("refused acquire answered %v", got)
		}
		holder, _ := srv.Do(t, "PTTL", lock).AsInt64()
		left, _ := srv.Do(t, "PTTL", mark).AsInt64()
		if left < holder || left > holder+3000 {
			t.Fatalf("mark PTTL %d, want between the holder's %d and that plus the waiter's lease", left, holder)
		}
		run(t, c, scripts.Release, rkeys, "c:a", "1", ch, "0")
	})

	step("a nested release frees nothing", 0, func() {
		run(t, c, scripts.Acquire, keys, "c:a", "10000", "0")
		run(t, c, scripts.Acquire, keys, "c:a", "10000", "1")
		run(t, c, scripts.Release, rkeys, "c:a", "2", ch, "0")
	})
	step("an abandon while marked", 1, func() {
		run(t, c, scripts.Release, rkeys, "c:a", "0", ch, "0")
	})

	srv.Do(t, "DEL", mark) // as if it had lapsed
	step("a lapsed mark", 0, func() {
		run(t, c, scripts.Acquire, keys, "c:a", "10000", "0")
		run(t, c, scripts.Release, rkeys, "c:a", "1", ch, "0")
	})
	step("the caller's own waiters", 1, func() {
		run(t, c, scripts.Acquire, keys, "c:a", "10000", "0")
		run(t, c, scripts.Release, rkeys, "c:a", "1", ch, "1")
	})
	step("the caller's own waiters, lock still held by another", 0, func() {
		run(t, c, scripts.Acquire, keys, "c:a", "10000", "0")
		run(t, c, scripts.Release, rkeys, "c:x", "0", ch, "1")
	})
	if n, _ := srv.Do(t, "EXISTS", mark).AsInt64(); n != 0 {
		t.Fatal("a release or a grant set the mark")
	}

	// A handoff whose acquire half is refused marks its waiter, as acquire does.
	if got := run(t, c, scripts.Handoff, keys, "c:y", "c:z", "2000"); len(got) != 3 || got[0] != -1 || got[1] != 0 {
		t.Fatalf("handoff past another holder answered %v", got)
	}
	if left, _ := srv.Do(t, "PTTL", mark).AsInt64(); left <= 0 {
		t.Fatalf("handoff refused without a mark (PTTL %d)", left)
	}
	run(t, c, scripts.Release, rkeys, "c:a", "1", ch, "0")

	// The mark lapses by itself.
	srv.Do(t, "PEXPIRE", mark, "1")
	for i := 0; i < 100; i++ {
		if n, _ := srv.Do(t, "EXISTS", mark).AsInt64(); n == 0 {
			return
		}
		srv.Do(t, "PING")
	}
	t.Fatal("mark did not lapse")
}

// scriptCalls is the number of commands scripts have run on the server:
// every command in INFO commandstats but the scripts themselves and what
// the test's connections send (handshakes, INFO, CONFIG).
func scriptCalls(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	info, _ := srv.Do(t, "INFO", "commandstats").ToString()
	var total int64
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !ok {
			continue
		}
		name, stats, _ := strings.Cut(rest, ":calls=")
		switch cmd, _, _ := strings.Cut(name, "|"); cmd {
		case "evalsha", "eval", "info", "config", "hello", "cluster", "client":
			continue
		}
		var n int64
		fmt.Sscanf(stats, "%d", &n)
		total += n
	}
	return total
}

// TestFreshGrantTakesFourCalls: a fresh acquire of a free name runs four
// commands (one EXISTS over the hash, the fair queue and
// the old per-name counter; HINCRBY, INCR, PEXPIRE), and grants what the
// general path grants; a name with an old per-name counter, or a repeat
// of the grant, takes the general path.
func TestFreshGrantTakesFourCalls(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	keys := scripts.GrantKeys("g", scripts.FairQueueKey("g"), scripts.WaitKey("g"))
	// A first grant elsewhere connects and loads the script: what is
	// counted below is one EVALSHA and what it runs.
	run(t, c, scripts.Acquire, scripts.GrantKeys("warm", scripts.FairQueueKey("warm"), scripts.WaitKey("warm")), "c:a", "10000", "0")
	srv.Do(t, "CONFIG", "RESETSTAT")
	got := run(t, c, scripts.Acquire, keys, "c:a", "10000", "0")
	if calls := scriptCalls(t, srv); calls != 4 {
		info, _ := srv.Do(t, "INFO", "commandstats").ToString()
		t.Fatalf("fresh grant ran %d commands, want 4\n%s", calls, info)
	}
	if len(got) != 3 || got[0] != 1 || got[1] != 1 || got[2] != 1 {
		t.Fatalf("fresh grant answered %v, want [1 1 1]", got)
	}
	if pttl, _ := srv.Do(t, "PTTL", scripts.LockKey("g")).AsInt64(); pttl <= 0 || pttl > 10000 {
		t.Fatalf("PTTL %d after the grant, want the 10 s lease", pttl)
	}
	// A repeat of the same grant (its reply lost) is answered the same.
	if again := run(t, c, scripts.Acquire, keys, "c:a", "10000", "0"); len(again) != 3 || again[0] != 1 || again[1] != 1 {
		t.Fatalf("repeat of the grant answered %v", again)
	}

	// An old per-name counter ahead of the slot counter: the general path
	// takes a token above it.
	keys = scripts.GrantKeys("h", scripts.FairQueueKey("h"), scripts.WaitKey("h"))
	srv.Do(t, "SET", scripts.LegacyFenceKey("h"), "100")
	if got := run(t, c, scripts.Acquire, keys, "c:a", "10000", "0"); len(got) != 3 || got[0] != 1 || got[2] <= 100 {
		t.Fatalf("grant over an old counter at 100 answered %v", got)
	}
}
