package scripts_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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
	keys := scripts.GrantKeys("s", scripts.FairQueueKey("s"))
	rkeys := []string{lock}
	steps := []struct {
		desc string
		src  string
		keys []string
		args []string
		want []int64
	}{
		{"fresh grant (the short reply: its token)", scripts.Acquire, keys, []string{"c:a", "10000", "0"}, []int64{1}},
		{"repeat of the grant", scripts.Acquire, keys, []string{"c:a", "10000", "0"}, []int64{1, 1, 1}},
		{"a grant elsewhere in the slot moves the counter", scripts.WithFence("return fence_take(KEYS[2])"), keys, nil, []int64{2}},
		{"a repeat still answers the hold's token", scripts.Acquire, keys, []string{"c:a", "10000", "0"}, []int64{1, 1, 1}},
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
		{"next grant, next token", scripts.Acquire, keys, []string{"c:b", "10000", "0"}, []int64{3}},
		{"abandon whatever the count", scripts.Release, rkeys, []string{"c:b", "0", ch, "0"}, []int64{0}},
		{"lost hold seen on reentry", scripts.Acquire, keys, []string{"c:b", "10000", "1"}, []int64{-1, 0}},
		{"handoff from a hold that is gone, lock free", scripts.Handoff, keys, []string{"c:a", "c:c", "10000"}, []int64{-1, 1, 1, 4}},
		{"handoff to a local waiter", scripts.Handoff, keys, []string{"c:c", "c:d", "10000"}, []int64{0, 1, 1, 5}},
		{"reentry after a handoff keeps its token", scripts.Acquire, keys, []string{"c:d", "10000", "1"}, []int64{1, 2, 5}},
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
	keys := scripts.GrantKeys("t", scripts.FairQueueKey("t"))
	run(t, c, scripts.Acquire, keys, "c:a", "60000", "0")
	run(t, c, scripts.Acquire, keys, "c:a", "1000", "1")
	run(t, c, scripts.Acquire, keys, "c:a", "1000", "1") // a repeat of the nested grant
	run(t, c, scripts.Renew, keys[:1], "c:a", "1000")
	if pttl, _ := srv.Do(t, "PTTL", keys[0]).AsInt64(); pttl < 50000 {
		t.Fatalf("PTTL %d: a shorter lease shortened the outer one", pttl)
	}
	run(t, c, scripts.Renew, keys[:1], "c:a", "90000")
	if pttl, _ := srv.Do(t, "PTTL", keys[0]).AsInt64(); pttl < 80000 {
		t.Fatalf("PTTL %d: a longer renewal did not extend the lease", pttl)
	}
}

// TestKindsRefuseEachOther: a name held as a reentrant lock (a string key)
// refuses every other kind's scripts, and another kind's hash, or a fair
// queue, refuses the reentrant lock's; a refused script writes nothing.
func TestKindsRefuseEachOther(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	dump := func(name string) string {
		var b strings.Builder
		for _, k := range []string{scripts.LockKey(name), scripts.FenceKey(name), scripts.FairQueueKey(name)} {
			typ, _ := srv.Do(t, "TYPE", k).ToString()
			b.WriteString(k + " " + typ + " ")
			switch typ {
			case "string":
				v, _ := srv.Do(t, "GET", k).ToString()
				b.WriteString(v)
			case "hash":
				m, _ := srv.Do(t, "HGETALL", k).AsStrMap()
				keys := make([]string, 0, len(m))
				for f := range m {
					keys = append(keys, f+"="+m[f])
				}
				slices.Sort(keys)
				b.WriteString(strings.Join(keys, ","))
			}
			pttl, _ := srv.Do(t, "PTTL", k).AsInt64()
			b.WriteString(" ttl>0=" + strconv.FormatBool(pttl > 0) + "\n")
		}
		return b.String()
	}
	unchanged := func(name, desc string, f func()) {
		t.Helper()
		before := dump(name)
		f()
		if after := dump(name); after != before {
			t.Fatalf("%s wrote:\nbefore:\n%s\nafter:\n%s", desc, before, after)
		}
	}
	want := func(desc string, got []int64, want ...int64) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("%s: got %v, want %v", desc, got, want)
		}
	}

	// A reentrant hold refuses the other kinds.
	const p = "plain"
	pk := scripts.GrantKeys(p, scripts.FairQueueKey(p))
	want("plain grant", run(t, c, scripts.Acquire, pk, "c:1:a", "10000", "0"), 1) // token 1
	fairArgs := []string{"c:1:f", "10000", "0", "5000", "take", scripts.ClientChannel(p, "")}
	unchanged(p, "the other kinds' scripts", func() {
		want("fair acquire", run(t, c, scripts.FairAcquireScript.Src, pk, fairArgs...), -2)
		want("fair release", run(t, c, scripts.FairReleaseScript.Src, pk, "c:1:f", "1", "5000", scripts.ClientChannel(p, "")), -1)
		want("fair renew", run(t, c, scripts.FairRenewScript.Src, pk[:1], "c:1:f", "10000"), 0)
		want("fair inspect", run(t, c, scripts.FairInspect, []string{pk[0], pk[2]}), -3)
		want("fair force unlock", run(t, c, scripts.FairForceUnlock, pk, "5000", scripts.ClientChannel(p, "")), 0)
		sk, sa := scripts.SemAcquireCall(p, "c:1:s", 10*time.Second, 0, 2)
		want("semaphore acquire", run(t, c, scripts.SemAcquire, sk, sa...), -2)
		rk, ra := scripts.SemReleaseCall(p, "c:1:s", 1)
		want("semaphore release", run(t, c, scripts.SemRelease, rk, ra...), -1)
		want("semaphore renew", run(t, c, scripts.SemRenew, pk[:1], "c:1:s", "10000"), 0)
		want("semaphore inspect", run(t, c, scripts.SemInspect, pk[:1]), -3)
		want("semaphore force unlock", run(t, c, scripts.SemForceUnlock, pk[:2], scripts.Channel(p)), 0)
		rwf := scripts.RWField(scripts.RWWrite, "c:1:w")
		wk, wa := scripts.RWAcquireCall(p, rwf, 10*time.Second, 0, 5*time.Second)
		want("rw acquire", run(t, c, scripts.RWAcquire, wk, wa...), -2)
		wk, wa = scripts.RWReleaseCall(p, rwf, 1)
		want("rw release", run(t, c, scripts.RWRelease, wk, wa...), -1)
		want("rw renew", run(t, c, scripts.RWRenew, pk[:1], rwf, "10000"), 0)
		want("rw keep-alive", run(t, c, scripts.RWKeepAlive, pk[:1], rwf, "10000"), 0)
		want("rw inspect", run(t, c, scripts.RWInspect, pk[:1]), -3)
		want("rw force unlock", run(t, c, scripts.RWForceUnlock, pk[:2], scripts.Channel(p)), 0)
	})

	// Another kind's hash refuses the reentrant lock's scripts.
	const o = "other"
	ok := scripts.GrantKeys(o, scripts.FairQueueKey(o))
	sk, sa := scripts.SemAcquireCall(o, "c:1:s", 10*time.Second, 0, 2)
	if got := run(t, c, scripts.SemAcquire, sk, sa...); len(got) != 3 || got[0] != 1 {
		t.Fatalf("semaphore grant: %v", got)
	}
	unchanged(o, "the reentrant lock's scripts on a semaphore", func() {
		want("acquire", run(t, c, scripts.Acquire, ok, "c:1:s", "10000", "0"), -2)
		want("nested acquire", run(t, c, scripts.Acquire, ok, "c:1:s", "10000", "1"), -1, 0)
		want("release", run(t, c, scripts.Release, ok[:1], "c:1:s", "1", scripts.Channel(o), "0"), -1)
		want("renew", run(t, c, scripts.Renew, ok[:1], "c:1:s", "10000"), 0)
		want("handoff", run(t, c, scripts.Handoff, ok, "c:1:s", "c:1:t", "10000"), -1, -2, 0)
		want("inspect", run(t, c, scripts.Inspect, ok[:1]), -2)
		want("force unlock", run(t, c, scripts.ForceUnlock, ok[:2], scripts.Channel(o)), 0)
	})

	// Fair waiters queued on a free name refuse a fresh grant and a handoff.
	const q = "queued"
	qk := scripts.GrantKeys(q, scripts.FairQueueKey(q))
	srv.Do(t, "HSET", qk[2], "seq", "1", "c:1:f", "1:99999999999999")
	unchanged(q, "the reentrant lock's scripts on a fair queue", func() {
		want("acquire", run(t, c, scripts.Acquire, qk, "c:1:a", "10000", "0"), -2)
		want("handoff", run(t, c, scripts.Handoff, qk, "c:1:a", "c:1:b", "10000"), -1, -2, 0)
	})
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
		if keys := scripts.GrantKeys(name, "x"); !slices.Equal(keys, []string{lock, fence, "x"}) {
			t.Errorf("GrantKeys(%q) = %v", name, keys)
		}
	}
	// Slot agrees with Redis Cluster's reference values.
	for key, want := range map[string]uint16{"123456789": 12739, "foo": 12182, "{user1000}.following": 3443} {
		if got := scripts.Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}

// The fence helpers every granting script shares, on a real server: peek
// reads the slot counter, take moves it, raise lifts it above a token seen
// elsewhere and never lowers it.
func TestFenceHelpers(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	keys := scripts.GrantKeys("f")
	take := scripts.WithFence("return fence_take(KEYS[2])")
	peek := scripts.WithFence("return fence_peek(KEYS[2])")
	raise := scripts.WithFence("fence_raise(KEYS[2], ARGV[1]) return fence_peek(KEYS[2])")
	steps := []struct {
		desc string
		src  string
		args []string
		want int64
	}{
		{"peek of a slot never granted", peek, nil, 0},
		{"take counts from 1", take, nil, 1},
		{"take counts on", take, nil, 2},
		{"raise below changes nothing", raise, []string{"1"}, 2},
		{"raise above lifts", raise, []string{"100"}, 100},
		{"take after a raise exceeds it", take, nil, 101},
		{"peek reads it", peek, nil, 101},
	}
	for _, s := range steps {
		if got := run(t, c, s.src, keys, s.args...); len(got) != 1 || got[0] != s.want {
			t.Fatalf("%s: got %v, want %d", s.desc, got, s.want)
		}
	}
}

// ParseHold reads what acquire.lua writes, and Hold.String writes it back.
func TestParseHold(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	keys := scripts.GrantKeys("h", scripts.FairQueueKey("h"))
	field := scripts.Field("web-3/4121", "0a1b2c3d4e5f", "job:7")
	run(t, c, scripts.Acquire, keys, field, "10000", "0")
	run(t, c, scripts.Acquire, keys, field, "10000", "1")
	run(t, c, scripts.Acquire, keys, "x:y:z", "10000", "0") // refused: marks the hold
	v, _ := srv.Do(t, "GET", keys[0]).ToString()
	h, ok := scripts.ParseHold(v)
	if want := (scripts.Hold{Field: field, Count: 2, Token: 1, Waited: true}); !ok || h != want || h.String() != v {
		t.Fatalf("ParseHold(%q) = %+v %v, want %+v", v, h, ok, want)
	}
	for _, bad := range []string{"", "x", "1:2", "0:1:f", "-1:1:f", "+1:1:f", "1:x:f", "W1:1:f"} {
		if h, ok := scripts.ParseHold(bad); ok {
			t.Errorf("ParseHold(%q) = %+v, want false", bad, h)
		}
	}
}

// KeysOf gives each key as its own function does.
func TestKeysOfMatchesTheKeyFunctions(t *testing.T) {
	for _, name := range []string{"a", "order:42", "{tagged}", "ünïcode", strings.Repeat("x", 300)} {
		got := scripts.KeysOf(name)
		want := scripts.NameKeys{
			Lock: scripts.LockKey(name), Fence: scripts.FenceKey(name),
			FairQueue: scripts.FairQueueKey(name), Channel: scripts.Channel(name),
		}
		if got != want {
			t.Fatalf("KeysOf(%q) = %+v, want %+v", name, got, want)
		}
	}
}
