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
// refused acquire marked the hold, or when the caller says it has waiters
// of its own, and otherwise not; the mark lives with the hold it was set
// on (a nested grant, a nested release and a handoff keep it) and goes with
// it.
func TestReleaseAnnouncesOnlyToWaiters(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	lock, ch := scripts.LockKey("m"), scripts.Channel("m")
	keys := scripts.GrantKeys("m", scripts.FairQueueKey("m"))
	rkeys := []string{lock}
	step := func(desc string, wantPub int64, f func()) {
		t.Helper()
		before := publishes(t, srv)
		f()
		if got := publishes(t, srv) - before; got != wantPub {
			t.Fatalf("%s: %d PUBLISH, want %d", desc, got, wantPub)
		}
	}
	marked := func() bool {
		t.Helper()
		v, _ := srv.Do(t, "GET", lock).ToString()
		h, ok := scripts.ParseHold(v)
		if !ok {
			t.Fatalf("lock key %q", v)
		}
		return h.Waited
	}

	step("nobody waits", 0, func() {
		run(t, c, scripts.Acquire, keys, "c:a", "10000", "0")
		run(t, c, scripts.Acquire, keys, "c:a", "10000", "1")
		if marked() {
			t.Fatal("a grant marked the hold")
		}
		run(t, c, scripts.Release, rkeys, "c:a", "2", ch, "0")
		run(t, c, scripts.Release, rkeys, "c:a", "1", ch, "0")
	})
	if n, _ := srv.Do(t, "EXISTS", lock).AsInt64(); n != 0 {
		t.Fatalf("%d keys left after an uncontended cycle", n)
	}

	step("a refused waiter is announced to", 1, func() {
		run(t, c, scripts.Acquire, keys, "c:a", "10000", "0")
		before, _ := srv.Do(t, "PTTL", lock).AsInt64()
		if got := run(t, c, scripts.Acquire, keys, "c:b", "3000", "0"); len(got) != 2 || got[0] != 0 || got[1] <= 0 || got[1] > before {
			t.Fatalf("refused acquire answered %v (PTTL before %d)", got, before)
		}
		if !marked() {
			t.Fatal("a refused acquire left no mark")
		}
		if after, _ := srv.Do(t, "PTTL", lock).AsInt64(); after > before || after < before-1000 {
			t.Fatalf("marking changed the hold's TTL: %d, then %d", before, after)
		}
		run(t, c, scripts.Release, rkeys, "c:a", "1", ch, "0")
	})

	step("a nested release frees nothing", 0, func() {
		run(t, c, scripts.Acquire, keys, "c:a", "10000", "0")
		run(t, c, scripts.Acquire, keys, "c:b", "3000", "0") // marks
		run(t, c, scripts.Acquire, keys, "c:a", "10000", "1")
		run(t, c, scripts.Release, rkeys, "c:a", "2", ch, "0")
		if !marked() {
			t.Fatal("a nested grant or release dropped the mark")
		}
	})
	step("an abandon while marked", 1, func() {
		run(t, c, scripts.Release, rkeys, "c:a", "0", ch, "0")
	})

	step("the next hold starts unmarked", 0, func() {
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

	// A handoff whose acquire half is refused marks the hold, as acquire does.
	if got := run(t, c, scripts.Handoff, keys, "c:y", "c:z", "2000"); len(got) != 3 || got[0] != -1 || got[1] != 0 {
		t.Fatalf("handoff past another holder answered %v", got)
	}
	if !marked() {
		t.Fatal("handoff refused without a mark")
	}
	// A handoff passes the mark to the new hold: its release announces.
	step("a handoff keeps the mark", 0, func() {
		if got := run(t, c, scripts.Handoff, keys, "c:a", "c:h", "10000"); len(got) != 4 || got[0] != 0 || got[1] != 1 {
			t.Fatalf("handoff answered %v", got)
		}
	})
	if !marked() {
		t.Fatal("the handoff dropped the mark")
	}
	step("the handed hold's release", 1, func() {
		run(t, c, scripts.Release, rkeys, "c:h", "1", ch, "0")
	})
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

// TestUncontendedCycleTakesFiveCalls: a fresh acquire of a free name runs
// three commands (one EXISTS over the lock key and the fair queue; INCR,
// SET PX), the final release of an unmarked hold two (GET, DEL), and a
// repeat of the grant answers the same grant.
func TestUncontendedCycleTakesFiveCalls(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	keys := scripts.GrantKeys("g", scripts.FairQueueKey("g"))
	// A first cycle elsewhere connects and loads the scripts: what is
	// counted below is the EVALSHAs and what they run.
	warm := scripts.GrantKeys("warm", scripts.FairQueueKey("warm"))
	run(t, c, scripts.Acquire, warm, "c:a", "10000", "0")
	run(t, c, scripts.Release, warm[:1], "c:a", "1", scripts.Channel("warm"), "0")
	count := func(desc string, want int64, f func()) {
		t.Helper()
		srv.Do(t, "CONFIG", "RESETSTAT")
		f()
		if calls := scriptCalls(t, srv); calls != want {
			info, _ := srv.Do(t, "INFO", "commandstats").ToString()
			t.Fatalf("%s ran %d commands, want %d\n%s", desc, calls, want, info)
		}
	}
	var got []int64
	count("a fresh grant", 3, func() { got = run(t, c, scripts.Acquire, keys, "c:a", "10000", "0") })
	if len(got) != 1 || got[0] < 1 {
		t.Fatalf("fresh grant answered %v, want its token alone", got)
	}
	token := got[0]
	if pttl, _ := srv.Do(t, "PTTL", scripts.LockKey("g")).AsInt64(); pttl <= 0 || pttl > 10000 {
		t.Fatalf("PTTL %d after the grant, want the 10 s lease", pttl)
	}
	// A repeat of the same grant (its reply lost) is answered the same.
	if again := run(t, c, scripts.Acquire, keys, "c:a", "10000", "0"); len(again) != 3 || again[0] != 1 || again[1] != 1 || again[2] != token {
		t.Fatalf("repeat of the grant answered %v", again)
	}
	count("a final release", 2, func() { got = run(t, c, scripts.Release, keys[:1], "c:a", "1", scripts.Channel("g"), "0") })
	if len(got) != 1 || got[0] != 0 {
		t.Fatalf("release answered %v", got)
	}
}
