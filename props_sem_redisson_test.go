package holdfast_test

import (
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redissontest"
	"github.com/holdfast/holdfast/scripts"
	"github.com/holdfast/holdfast/sim"
)

// TestSemaphorePropertiesRedisson: TestSemaphoreProperties with the Redisson
// layout's scripts (Config.Layout = LayoutRedisson): Redisson's free count
// and lease records, which Java-like clients share: they take permits with
// leases and release them by running Redisson's scripts on the primary, on
// Redis's clock, and exclusion counts their permits beside the Go ones
// (until the lease's end or the release). Its checks are the semaphore's but fencing (a Redisson
// permit has no token) and, for what a dead client leaves, the lease
// records: a stopped client's permits have ended one lease after it
// stopped, and once every Lock is over the free count and the records still
// make the semaphore's size, with no record of a live lease left.
func TestSemaphorePropertiesRedisson(t *testing.T) {
	if m := os.Getenv(redissonSemMutantEnv); m != "" {
		defer breakRedissonSemScript(t, m)()
	}
	runs, shared, javaGrants, mixed := 0, 0, 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		p := newRedissonSemWorld(rt)
		p.permits = rapid.IntRange(1, 3).Draw(rt, "permits")
		actions := p.faultActions()
		actions["take"] = func(t *rapid.T) { p.lock(t, false) }
		actions["crowd"] = p.readers
		actions["java"] = p.javaAcquire
		actions["javaRelease"] = p.javaRelease
		rt.Repeat(actions)
		p.liveness(rt)
		runs++
		if p.permits > 1 && p.overlap >= 2 {
			shared++
		}
		javaGrants += len(p.java)
		if p.goBesideJava() {
			mixed++
		}
	})
	t.Logf("%d of %d runs had permits of distinct owners held at once, %d a Go and a Java permit at once; %d Java grants",
		shared, runs, mixed, javaGrants)
	if runs >= 20 && (shared == 0 || mixed == 0) {
		t.Fatal("permits were never shared, or never by Go and Java: the property runs do not exercise the semaphore")
	}
}

// goBesideJava reports whether a Go owner validly held a name while a Java
// permit of it was held.
func (p *rwWorld) goBesideJava() bool {
	for _, h := range rwHolds(p.w) {
		for _, j := range p.java {
			if j.name == h.name && h.from.Before(j.to) && j.from.Before(h.to) {
				return true
			}
		}
	}
	return false
}

// newRedissonSemWorld is newRWWorld with Redisson-layout clients.
func newRedissonSemWorld(t *rapid.T) *rwWorld {
	cfg := sim.Config{
		Seed:           rapid.Int64().Draw(t, "seed"),
		Replicas:       rapid.IntRange(0, 2).Draw(t, "replicas"),
		MaxDelay:       time.Duration(rapid.IntRange(1, 20).Draw(t, "maxDelayMs")) * time.Millisecond,
		ReplicationLag: time.Duration(rapid.IntRange(1, 50).Draw(t, "lagMs")) * time.Millisecond,
	}
	p := &rwWorld{w: sim.New(cfg), maxDelay: cfg.MaxDelay, redisson: true}
	// The Java-like clients' clock runs ahead of Redis's by up to 3 ms
	// (HOLDFAST_TEST_JAVA_AHEAD_MS sets it, to show what more does), within
	// the part of a Go hold's drift allowance (Drift: 1% of the lease plus
	// 2 ms, here of 300 ms at least) that the Go clients' own ±5‰ leaves.
	p.javaAhead = time.Duration(rapid.IntRange(0, 3).Draw(t, "javaAheadMs")) * time.Millisecond
	if ms, err := strconv.Atoi(os.Getenv(javaAheadEnv)); err == nil {
		p.javaAhead = time.Duration(ms) * time.Millisecond
	}
	for i := range 3 {
		id := fmt.Sprintf("c%d", i+1)
		p.clients = append(p.clients, p.w.NewClient(sim.ClientConfig{
			ID:              id,
			WatchdogTimeout: time.Duration(rapid.IntRange(300, int(rwMaxLease/time.Millisecond)).Draw(t, "watchdogMs")) * time.Millisecond,
			Drift:           float64(rapid.IntRange(-5, 5).Draw(t, "drift‰")) / 1000,
			Layout:          holdfast.LayoutRedisson,
		}))
		p.ids = append(p.ids, id)
		p.paused = append(p.paused, false)
		p.pausedAt = append(p.pausedAt, time.Time{})
	}
	return p
}

// leaseEnds returns the lease records of the semaphore name on the primary:
// permit id (hex) -> the end of its lease.
func leaseEnds(t *rapid.T, w *sim.World, name string) map[string]time.Time {
	r := w.Primary().Do("ZRANGE", scripts.RedissonSemLeaseKey(name), "0", "-1", "WITHSCORES")
	if r.IsError() {
		t.Fatalf("ZRANGE of %q's lease records: %s", name, r.Str)
	}
	out := map[string]time.Time{}
	for i := 0; i+1 < len(r.Array); i += 2 {
		ms, err := strconv.ParseInt(r.Array[i+1].Str, 10, 64)
		if err != nil {
			t.Fatalf("lease record of %q scored %q: not integer milliseconds", name, r.Array[i+1].Str)
		}
		out[hex.EncodeToString([]byte(r.Array[i].Str))] = time.UnixMilli(ms)
	}
	return out
}

// checkDeadPermits: a paused client's permits (their lease records) have
// ended one lease after it stopped, whatever the live holders renewed.
func (p *rwWorld) checkDeadPermits(t *rapid.T) {
	mine := map[string]string{} // permit id -> client
	for _, e := range p.w.History() {
		if e.Kind == sim.Acquired {
			mine[e.Field] = e.Client
		}
	}
	for i, id := range p.ids {
		if !p.paused[i] || p.w.Now().Before(p.pausedAt[i].Add(rwMaxLease+2*p.maxDelay)) {
			continue
		}
		for _, name := range []string{"a", "b"} {
			for permit, ends := range leaseEnds(t, p.w, name) {
				if mine[permit] == id && ends.After(p.w.Now()) {
					t.Fatalf("permit %s of client %s on %q, stopped at %v, has a lease to %v at %v", permit, id, name,
						p.pausedAt[i].Sub(sim.Start), ends.Sub(sim.Start), p.w.Now().Sub(sim.Start))
				}
			}
		}
	}
}

// checkSemRedissonLeft: after every Lock is over and the clients closed, no
// lease record has a live lease, and each name's free count and records
// make its size.
func (p *rwWorld) checkSemRedissonLeft(t *rapid.T) {
	for _, name := range []string{"a", "b"} {
		free := p.w.Primary().Do("GET", name)
		recs := leaseEnds(t, p.w, name)
		if free.Str == "" && len(recs) == 0 {
			continue // never used
		}
		n, err := strconv.Atoi(free.Str)
		if err != nil || n+len(recs) != p.permits {
			t.Fatalf("left in Redis: %q free %q and %d lease records, on %d permits", name, free.Str, len(recs), p.permits)
		}
		for permit, ends := range recs {
			if ends.After(p.w.Now()) {
				t.Fatalf("left in Redis: permit %s on %q with a lease to %v at %v", permit, name,
					ends.Sub(sim.Start), p.w.Now().Sub(sim.Start))
			}
		}
	}
	for _, k := range p.w.Keys() {
		if k != "a" && k != "b" && k != scripts.RedissonSemLeaseKey("a") && k != scripts.RedissonSemLeaseKey("b") {
			t.Fatalf("left in Redis: key %s", k)
		}
	}
}

// javaAheadEnv sets how far the Java-like clients' clock runs ahead of
// Redis's, in ms (TestSemaphorePropertiesRedissonJavaClockFarAhead).
const javaAheadEnv = "HOLDFAST_TEST_JAVA_AHEAD_MS"

// TestSemaphorePropertiesRedissonJavaClockFarAhead: a Java clock 100 ms ahead
// of Redis's takes back Go permits before their holders' deadlines, which
// exclusion catches: the bound on the clock offset is needed, and checked.
func TestSemaphorePropertiesRedissonJavaClockFarAhead(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestSemaphorePropertiesRedisson$", "-test.count=1",
		"-rapid.checks=2000", "-rapid.nofailfile", "-rapid.shrinktime=2s")
	cmd.Env = append(os.Environ(), javaAheadEnv+"=100")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the properties passed with a Java clock 100 ms ahead:\n%s", tail(string(out), 3000))
	}
	if !strings.Contains(string(out), "exclusion:") {
		t.Fatalf("a Java clock 100 ms ahead failed without exclusion:\n%s", tail(string(out), 3000))
	}
}

// redissonSemMutantEnv names the script defect TestSemaphorePropertiesRedisson
// runs with, for TestSemaphorePropertiesRedissonCatchBrokenScripts.
const redissonSemMutantEnv = "HOLDFAST_TEST_REDISSON_SEM_MUTANT"

// redissonSemMutants are deliberate defects of the layout's semaphore
// scripts, each caught by one check within a few schedules: the script and
// its replacements (text -> text), and what the failure names.
var redissonSemMutants = map[string]struct {
	script    *scripts.Script
	edits     []string
	failsWith string
}{
	// A grant with no free permit.
	"exclusion": {scripts.RedissonSemAcquireScript,
		[]string{"if tonumber(avail or '0') < 1 then", "if tonumber(avail or '0') < 0 then"}, "exclusion:"},
	// Waiters told to sleep an hour, and no release announced.
	"lost wake-up": {scripts.RedissonSemAcquireScript, []string{
		"return {0, math.max(tonumber(first[2]) - now, 0)}", "return {0, 3600000}",
		"  return {0, -1}\nend", "  return {0, 3600000}\nend",
	}, "liveness:"},
}

// breakRedissonSemScript applies the mutant named m and returns what undoes
// it.
func breakRedissonSemScript(t *testing.T, m string) func() {
	mu, ok := redissonSemMutants[m]
	if !ok {
		t.Fatalf("no mutant %q", m)
	}
	edit := func(s *scripts.Script, edits ...string) func() {
		src := s.Src
		for i := 0; i+1 < len(edits); i += 2 {
			if !strings.Contains(s.Src, edits[i]) {
				t.Fatalf("mutant %q: %q is not in %s", m, edits[i], s.Name)
			}
			s.Src = strings.Replace(s.Src, edits[i], edits[i+1], 1)
		}
		return func() { s.Src = src }
	}
	undo := []func(){edit(mu.script, mu.edits...)}
	if m == "lost wake-up" {
		undo = append(undo, edit(scripts.RedissonSemReleaseScript,
			"if n > 0 then redis.call('publish', channel, string.format('%d', n)) end\nreturn 0", "return 0"))
	}
	return func() {
		for _, u := range undo {
			u()
		}
	}
}

// TestSemaphorePropertiesRedissonCatchBrokenScripts runs
// TestSemaphorePropertiesRedisson in a child process once per mutant and
// requires it to fail with the check the mutant breaks.
func TestSemaphorePropertiesRedissonCatchBrokenScripts(t *testing.T) {
	for name, mu := range redissonSemMutants {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestSemaphorePropertiesRedisson$", "-test.count=1",
				"-rapid.checks=500", "-rapid.nofailfile", "-rapid.shrinktime=2s")
			cmd.Env = append(os.Environ(), redissonSemMutantEnv+"="+name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the properties passed with the %q defect:\n%s", name, out)
			}
			if !strings.Contains(string(out), mu.failsWith) {
				t.Fatalf("the %q defect failed without %q:\n%s", name, mu.failsWith, tail(string(out), 3000))
			}
		})
	}
}

// javaPermit is a permit a Java-like client took with Redisson's script.
type javaPermit struct {
	name     string
	id       string // the 16 bytes in the lease records
	from, to time.Time
	released bool
}

// javaAcquire takes one permit of a name as Redisson's tryAcquire(lease)
// does, setting the semaphore up first as trySetPermits would.
func (p *rwWorld) javaAcquire(t *rapid.T) {
	name := rapid.SampledFrom([]string{"a", "b"}).Draw(t, "name")
	lease := time.Duration(rapid.IntRange(200, 3000).Draw(t, "javaLeaseMs")) * time.Millisecond
	n := p.w.Primary()
	if n.Do("EXISTS", name).Int == 0 && n.Do("EXISTS", scripts.RedissonSemLeaseKey(name)).Int == 0 {
		n.Do("SET", name, strconv.Itoa(p.permits))
	}
	now := p.w.Now().Add(p.javaAhead) // the Java client's clock
	id := fmt.Sprintf("java-permit-%04d", len(p.java))
	r := n.Eval(redissontest.SemTryAcquireSrc, scripts.RedissonSemKeys(name),
		[]string{"1", strconv.FormatInt(now.Add(lease).UnixMilli(), 10), strconv.FormatInt(now.UnixMilli(), 10),
			strconv.Itoa(redissontest.NonExpirableTimeout), "PUBLISH", id})
	if r.IsError() {
		t.Fatalf("Java tryAcquire: %s", r.Str)
	}
	if r.Str == "OK" {
		// Held from now until the Java clock reads the lease's end.
		ends := time.UnixMilli(now.Add(lease).UnixMilli()).Add(-p.javaAhead)
		p.java = append(p.java, &javaPermit{name: name, id: id, from: p.w.Now(), to: ends})
	}
}

// javaRelease releases a Java permit as Redisson's release does.
func (p *rwWorld) javaRelease(t *rapid.T) {
	var open []*javaPermit
	for _, j := range p.java {
		if !j.released {
			open = append(open, j)
		}
	}
	if len(open) == 0 {
		t.Skip("no Java permit")
	}
	j := rapid.SampledFrom(open).Draw(t, "javaPermit")
	now := p.w.Now().Add(p.javaAhead)
	keys := scripts.RedissonSemKeys(j.name)
	r := p.w.Primary().Eval(redissontest.SemReleaseSrc, []string{keys[0], keys[2], keys[1]},
		[]string{j.id, "1", strconv.FormatInt(now.UnixMilli(), 10), "PUBLISH"})
	if r.IsError() {
		t.Fatalf("Java release: %s", r.Str)
	}
	j.released = true
	if p.w.Now().Before(j.to) {
		j.to = p.w.Now()
	}
}

// checkJavaExclusion: at no instant before the first data roll-back do the
// Go owners validly holding a name and the Java permits of it number more
// than its permits.
func (p *rwWorld) checkJavaExclusion(t *rapid.T, hs []rwHold) {
	var instants []time.Time
	for _, h := range hs {
		instants = append(instants, h.from)
	}
	for _, j := range p.java {
		instants = append(instants, j.from)
	}
	for _, name := range []string{"a", "b"} {
		for _, x := range instants {
			if !p.rollback.IsZero() && !x.Before(p.rollback) {
				continue
			}
			at := map[string]bool{}
			for _, b := range hs {
				if b.name == name && !b.from.After(x) && x.Before(b.to) {
					at[b.client+"/"+b.field] = true
				}
			}
			for _, j := range p.java {
				if j.name == name && !j.from.After(x) && x.Before(j.to) {
					at["java/"+j.id] = true
				}
			}
			if len(at) > p.permits {
				t.Fatalf("exclusion: %d holders of %q at %v on %d permits, Go and Java: %v",
					len(at), name, x.Sub(sim.Start), p.permits, at)
			}
		}
	}
}
