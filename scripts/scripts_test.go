package scripts_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
)

func TestValidateName(t *testing.T) {
	long := make([]byte, scripts.MaxNameLen+1)
	for i := range long {
		long[i] = 'x'
	}
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"orders:42", true},
		{"a}b", true},
		{string(long[:scripts.MaxNameLen]), true},
		{"", false},
		{"}x", false},
		{string(long), false},
	} {
		if err := scripts.ValidateName(tc.name); (err == nil) != tc.ok {
			t.Errorf("ValidateName(%.20q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	if name, ok := scripts.NameOfChannel(scripts.Channel("a:b")); !ok || name != "a:b" {
		t.Fatalf("NameOfChannel round trip: %q %v", name, ok)
	}
}

// run evaluates src on the server and returns its integer (array) reply.
func run(t *testing.T, c rueidis.Client, src string, keys []string, args ...string) []int64 {
	t.Helper()
	res := rueidis.NewLuaScript(src).Exec(context.Background(), c, keys, args)
	if vs, err := res.AsIntSlice(); err == nil {
		return vs
	}
	v, err := res.AsInt64()
	if err != nil {
		t.Fatalf("script error: %v", err)
	}
	return []int64{v}
}

// pttl in a wanted reply stands for any remaining TTL in (0, 10000] ms.
const pttl = -999

// TestScriptsOnRealRedis walks the scripts through the cases their headers
// document, on a real server.
func TestScriptsOnRealRedis(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	lock, ch := scripts.LockKey("s"), scripts.Channel("s")
	keys := scripts.GrantKeys("s", scripts.FairQueueKey("s"), scripts.WaitKey("s"))
	rkeys := []string{lock, scripts.WaitKey("s")}
	steps := []struct {
		desc string
		src  string
		keys []string
		args []string
		want []int64
	}{
		{"fresh grant", scripts.Acquire, keys, []string{"c:a", "10000", "0"}, []int64{1, 1, 1}},
		{"repeat of the grant", scripts.Acquire, keys, []string{"c:a", "10000", "0"}, []int64{1, 1, 1}},
		{"other owner waits with pttl", scripts.Acquire, keys, []string{"c:b", "10000", "0"}, nil},
		{"reentry keeps the token", scripts.Acquire, keys, []string{"c:a", "10000", "1"}, []int64{1, 2, 1}},
		{"count mismatch", scripts.Acquire, keys, []string{"c:a", "10000", "5"}, []int64{-1, 2}},
		{"renew mine, not theirs", scripts.Renew, []string{lock, scripts.LockKey("none")}, []string{"c:a", "20000", "c:a", "20000"}, []int64{1, 0}},
		{"release by a stranger", scripts.Release, rkeys, []string{"c:b", "1", ch, "0"}, []int64{-1}},
		{"release inner", scripts.Release, rkeys, []string{"c:a", "2", ch, "0"}, []int64{1}},
		{"repeat of inner release", scripts.Release, rkeys, []string{"c:a", "2", ch, "0"}, []int64{1}},
		{"release mismatch", scripts.Release, rkeys, []string{"c:a", "4", ch, "0"}, []int64{-2}},
		{"release outer", scripts.Release, rkeys, []string{"c:a", "1", ch, "0"}, []int64{0}},
		{"repeat of final release", scripts.Release, rkeys, []string{"c:a", "1", ch, "0"}, []int64{-1}},
		{"next grant, next token", scripts.Acquire, keys, []string{"c:b", "10000", "0"}, []int64{1, 1, 2}},
		{"abandon whatever the count", scripts.Release, rkeys, []string{"c:b", "0", ch, "0"}, []int64{0}},
		{"lost hold seen on reentry", scripts.Acquire, keys, []string{"c:b", "10000", "1"}, []int64{-1, 0}},
		{"handoff from a hold that is gone, lock free", scripts.Handoff, keys, []string{"c:a", "c:c", "10000"}, []int64{-1, 1, 1, 3}},
		{"handoff to a local waiter", scripts.Handoff, keys, []string{"c:c", "c:d", "10000"}, []int64{0, 1, 1, 4}},
		{"reentry after a handoff keeps its token", scripts.Acquire, keys, []string{"c:d", "10000", "1"}, []int64{1, 2, 4}},
		{"handoff of a nested hold changes nothing", scripts.Handoff, keys, []string{"c:d", "c:e", "10000"}, []int64{-2, 0, pttl}},
		{"handoff by a stranger to the holder", scripts.Handoff, keys, []string{"c:x", "c:d", "10000"}, []int64{-1, -1, 2}},
		{"release inner after handoffs", scripts.Release, rkeys, []string{"c:d", "2", ch, "0"}, []int64{1}},
		{"release outer after handoffs", scripts.Release, rkeys, []string{"c:d", "1", ch, "0"}, []int64{0}},
	}
	for _, s := range steps {
		got := run(t, c, s.src, s.keys, s.args...)
		if i := slices.Index(s.want, pttl); i >= 0 && len(got) == len(s.want) && got[i] > 0 && got[i] <= 10000 {
			got[i] = pttl
		}
		if s.want == nil {
			if len(got) != 2 || got[0] != 0 || got[1] <= 0 || got[1] > 10000 {
				t.Fatalf("%s: got %v, want {0, pttl}", s.desc, got)
			}
			continue
		}
		if !slices.Equal(got, s.want) {
			t.Fatalf("%s: got %v, want %v", s.desc, got, s.want)
		}
	}
	if n, _ := srv.Do(t, "EXISTS", lock).AsInt64(); n != 0 {
		t.Fatal("lock key left behind")
	}
}

func TestShorterReentryLeaseDoesNotCutTTL(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	keys := scripts.GrantKeys("t", scripts.FairQueueKey("t"), scripts.WaitKey("t"))
	run(t, c, scripts.Acquire, keys, "c:a", "60000", "0")
	run(t, c, scripts.Acquire, keys, "c:a", "1000", "1")
	if pttl, _ := srv.Do(t, "PTTL", keys[0]).AsInt64(); pttl < 50000 {
		t.Fatalf("PTTL %d: a nested shorter lease shortened the outer one", pttl)
	}
}

func TestWrongTypeAbortsBeforeWriting(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	srv.Do(t, "SET", scripts.LockKey("w"), "x")
	res := rueidis.NewLuaScript(scripts.Acquire).Exec(context.Background(), c,
		scripts.GrantKeys("w", scripts.FairQueueKey("w"), scripts.WaitKey("w")), []string{"c:a", "1000", "0"})
	if err := res.Error(); err == nil {
		t.Fatal("acquire on a string key succeeded")
	}
	if n, _ := srv.Do(t, "EXISTS", scripts.FenceKey("w")).AsInt64(); n != 0 {
		t.Fatal("fence counter written by a failed acquire")
	}
}

func TestFieldParsesBack(t *testing.T) {
	cases := []struct{ id, instance, owner string }{
		{"web-3/4121", "0a1b2c3d4e5f", "~1"},
		{"svc", "s1", "job:7:retry"}, // colons in the owner stay in the owner
		{"", "x", ""},
	}
	for _, c := range cases {
		f := scripts.Field(c.id, c.instance, c.owner)
		id, instance, owner, ok := scripts.ParseField(f)
		if !ok || id != c.id || instance != c.instance || owner != c.owner {
			t.Errorf("ParseField(%q) = %q %q %q %v, want %q %q %q", f, id, instance, owner, ok, c.id, c.instance, c.owner)
		}
	}
	for _, f := range []string{"", "svc", "svc:~1"} {
		if _, _, _, ok := scripts.ParseField(f); ok {
			t.Errorf("ParseField(%q) accepted a field without an instance part", f)
		}
	}
}

// A name's fence counter lies in its lock key's slot (so one script may touch
// both on a cluster) and is no key of any lock.
func TestFenceKeyInLockSlot(t *testing.T) {
	for _, name := range []string{"a", "orders:42", "user}7", "{x}", "ü", strings.Repeat("n", scripts.MaxNameLen)} {
		lock, fence := scripts.LockKey(name), scripts.FenceKey(name)
		if scripts.Slot(fence) != scripts.Slot(lock) {
			t.Errorf("%q: fence key %q in slot %d, lock key in %d", name, fence, scripts.Slot(fence), scripts.Slot(lock))
		}
		if !strings.HasPrefix(fence, "holdfast:slot:{") || strings.HasPrefix(fence, "holdfast:{") {
			t.Errorf("%q: fence key %q could be a lock's key", name, fence)
		}
		if keys := scripts.FenceKeys(name); len(keys) != 2 || keys[0] != fence || keys[1] != scripts.LegacyFenceKey(name) {
			t.Errorf("FenceKeys(%q) = %v", name, keys)
		}
	}
	// Slot agrees with Redis Cluster's reference values.
	for key, want := range map[string]uint16{"123456789": 12739, "foo": 12182, "{user1000}.following": 3443} {
		if got := scripts.Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}

// The fence helpers every granting script shares, on a real server: take
// moves past an old per-name counter and deletes it, peek reads the larger,
// raise lifts the slot counter above a token seen elsewhere.
func TestFenceHelpers(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	keys := scripts.GrantKeys("f")
	take := scripts.WithFence("return fence_take(KEYS[2], KEYS[3])")
	peek := scripts.WithFence("return fence_peek(KEYS[2], KEYS[3])")
	raise := scripts.WithFence("fence_raise(KEYS[2], KEYS[3], ARGV[1]) return fence_peek(KEYS[2], KEYS[3])")
	srv.Do(t, "SET", scripts.LegacyFenceKey("f"), "40")
	steps := []struct {
		desc string
		src  string
		args []string
		want int64
	}{
		{"peek sees the old counter", peek, nil, 40},
		{"take passes it", take, nil, 41},
		{"take counts on", take, nil, 42},
		{"raise below changes nothing", raise, []string{"10"}, 42},
		{"raise above lifts", raise, []string{"100"}, 100},
		{"take after a raise exceeds it", take, nil, 101},
	}
	for _, s := range steps {
		if got := run(t, c, s.src, keys, s.args...); len(got) != 1 || got[0] != s.want {
			t.Fatalf("%s: got %v, want %d", s.desc, got, s.want)
		}
		if s.desc == "take passes it" {
			if n, _ := srv.Do(t, "EXISTS", scripts.LegacyFenceKey("f")).AsInt64(); n != 0 {
				t.Fatal("the old counter is still there once the slot counter passed it")
			}
		}
	}
	// An old counter above a raise: the raise keeps it readable.
	srv.Do(t, "SET", scripts.LegacyFenceKey("f"), "500")
	if got := run(t, c, raise, keys, "200"); got[0] != 500 {
		t.Fatalf("raise to 200 under an old counter of 500 reads %d", got[0])
	}
}

// KeysOf gives each key as its own function does.
func TestKeysOfMatchesTheKeyFunctions(t *testing.T) {
	for _, name := range []string{"a", "order:42", "{tagged}", "ünïcode", strings.Repeat("x", 300)} {
		got := scripts.KeysOf(name)
		want := scripts.NameKeys{
			Lock: scripts.LockKey(name), Fence: scripts.FenceKey(name), LegacyFence: scripts.LegacyFenceKey(name),
			FairQueue: scripts.FairQueueKey(name), Wait: scripts.WaitKey(name), Channel: scripts.Channel(name),
		}
		if got != want {
			t.Fatalf("KeysOf(%q) = %+v, want %+v", name, got, want)
		}
	}
}
