package scripts_test

import (
	"encoding/hex"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
)

// TestRedissonSemScripts walks the Redisson layout's semaphore scripts
// through the cases their headers document, on a real server.
func TestRedissonSemScripts(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	const name = "exports"
	keys := scripts.RedissonSemKeys(name)
	a := scripts.RedissonPermitID("client-1:1")
	b := scripts.RedissonPermitID("client-1:2")
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(a) || a == b || a != scripts.RedissonPermitID("client-1:1") {
		t.Fatalf("permit ids %q, %q: want 32 hex digits, one per field", a, b)
	}
	acquire := func(id string, expected int64, permits int) []int64 {
		t.Helper()
		return run(t, c, scripts.RedissonSemAcquire, keys, scripts.RedissonSemAcquireArgs(id, 10*time.Second, expected, permits)...)
	}
	release := func(id string, expected int64) []int64 {
		t.Helper()
		return run(t, c, scripts.RedissonSemRelease, keys, scripts.RedissonSemReleaseArgs(id, expected)...)
	}
	renew := func(id string) []int64 {
		t.Helper()
		return run(t, c, scripts.RedissonSemRenew, []string{scripts.RedissonSemLeaseKey(name)}, id, "20000")
	}
	want := func(what string, got []int64, w ...int64) {
		t.Helper()
		if len(got) != len(w) {
			t.Fatalf("%s answered %v, want %v", what, got, w)
		}
		for i := range w {
			if got[i] != w[i] {
				t.Fatalf("%s answered %v, want %v", what, got, w)
			}
		}
	}

	want("fresh grant on a new name", acquire(a, 0, 1), 1, 1, 0)
	if free, err := srv.Do(t, "GET", name).AsInt64(); free != 0 || err != nil {
		t.Fatalf("free count %d, %v; want 0 of 1", free, err)
	}
	want("repeat of the grant", acquire(a, 0, 1), 1, 1, 0)
	want("reentry", acquire(a, 1, 1), 1, 2, 0)
	want("another size", acquire(b, 0, 2), -4, 1)
	got := acquire(b, 0, 1)
	if len(got) != 2 || got[0] != 0 || got[1] <= 0 || got[1] > 10000 {
		t.Fatalf("full: answered %v, want {0, the lease left}", got)
	}
	want("renewal", renew(a), 1)
	if ms := leaseLeft(t, srv, name, a); ms < 15000 || ms > 20000 {
		t.Fatalf("renewed lease %dms, want 20s", ms)
	}
	want("renewal of another's id", renew(b), 0)
	want("inner release", release(a, 2), 1)
	want("final release", release(a, 1), 0)
	want("release again", release(a, 1), -1)
	want("reentry of a released permit", acquire(a, 1, 1), -1, 0)

	// A Java permit with no lease: the waiter has no end to wait for.
	raw, _ := hex.DecodeString(b)
	srv.Do(t, "DECRBY", name, "1")
	srv.Do(t, "ZADD", scripts.RedissonSemLeaseKey(name), "922337203685477", string(raw))
	want("full of a permit with no lease", acquire(a, 0, 1), 0, -1)

	// A lease that ended (by Redis's clock) is taken back, and its new free
	// count announced, by the next call.
	srv.Do(t, "ZADD", scripts.RedissonSemLeaseKey(name), "1000", string(raw))
	want("grant after a lease ended", acquire(a, 0, 1), 1, 1, 0)
	if n, err := srv.Do(t, "ZCARD", scripts.RedissonSemLeaseKey(name)).AsInt64(); n != 1 || err != nil {
		t.Fatalf("records left %d, %v; want a's alone", n, err)
	}
	if free, err := srv.Do(t, "GET", name).AsInt64(); free != 0 || err != nil {
		t.Fatalf("free count %d, %v; want 0 of 1", free, err)
	}

	for _, k := range []struct{ name, typ string }{{"h", "hash"}, {"s", "string"}, {"z", "timeout"}} {
		ks := scripts.RedissonSemKeys(k.name)
		switch k.typ {
		case "hash":
			srv.Do(t, "HSET", k.name, "id:1", "1")
		case "string":
			srv.Do(t, "SET", k.name, "not a count")
		case "timeout":
			srv.Do(t, "SET", k.name, "2")
			srv.Do(t, "SET", ks[1], "x")
		}
		want("acquire on a "+k.typ, run(t, c, scripts.RedissonSemAcquire, ks, scripts.RedissonSemAcquireArgs(a, time.Second, 0, 2)...), -2)
		want("release on a "+k.typ, run(t, c, scripts.RedissonSemRelease, ks, scripts.RedissonSemReleaseArgs(a, 1)...), -1)
	}
}

// leaseLeft is the milliseconds left of permit id's lease on name.
func leaseLeft(t *testing.T, srv *redistest.Server, name, id string) int64 {
	t.Helper()
	raw, _ := hex.DecodeString(id)
	s, err := srv.Do(t, "ZSCORE", scripts.RedissonSemLeaseKey(name), string(raw)).ToString()
	if err != nil {
		f, ferr := srv.Do(t, "ZSCORE", scripts.RedissonSemLeaseKey(name), string(raw)).AsFloat64()
		if ferr != nil {
			t.Fatal(err, ferr)
		}
		s = strconv.FormatFloat(f, 'f', -1, 64)
	}
	ends, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("score %q: %v", s, err)
	}
	return time.UnixMilli(ends).Sub(time.Now()).Milliseconds()
}
