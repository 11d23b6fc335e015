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
