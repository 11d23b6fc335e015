package holdfast_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/holdfast/holdfast/scripts"
	"github.com/holdfast/holdfast/sim"
)

// Property tests of the semaphore on the deterministic simulator. The world
// is the read-write lock's (props_rw_test.go) with its locks made by
// Semaphore(name, permits), permits drawn per run from 1 to 3; rapid draws
// the same actions and faults and checks after every action:
//
//   - exclusion: at no instant do more than permits owners validly hold a
//     name (before the first data roll-back, which asynchronous
//     replication does not promise to survive);
//   - fencing: a token is never given to two owners of a name, and with one
//     permit tokens strictly increase grant after grant;
//   - validity: no holder is told of a deadline past its permit's own lease
//     key's expiry;
//   - a dead (paused) client's permits free on their own: their lease keys
//     are gone one lease after it stopped, whatever the live holders renew;
//
// and, once the faults stop, that every Lock is granted or gives up (no
// lost wake-up) and nothing is left in Redis.
// TestSemaphorePropertiesCatchBrokenScripts shows each check failing on a
// deliberately broken script.
func TestSemaphoreProperties(t *testing.T) {
	if m := os.Getenv(semMutantEnv); m != "" {
		defer breakSemScript(t, m)()
	}
	runs, shared := 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		p := newRWWorld(rt)
		p.permits = rapid.IntRange(1, 3).Draw(rt, "permits")
		actions := p.faultActions()
		actions["take"] = func(t *rapid.T) { p.lock(t, false) }
		actions["crowd"] = p.readers // every live client takes one name at once
		rt.Repeat(actions)
		p.liveness(rt)
		runs++
		if p.permits > 1 && p.overlap >= 2 {
			shared++
		}
	})
	t.Logf("%d of %d runs had permits of distinct owners held at once", shared, runs)
	if runs >= 20 && shared == 0 {
		t.Fatal("permits were never shared: the property runs do not exercise the semaphore")
	}
}

// checkSem is check for a semaphore's world.
func (p *rwWorld) checkSem(t *rapid.T) {
	hs := rwHolds(p.w)
	owner := func(h rwHold) string { return h.client + "/" + h.field }
	for _, a := range hs {
		if !p.rollback.IsZero() && !a.from.Before(p.rollback) {
			continue
		}
		// The owners validly holding a's name at the instant a began.
		at := map[string]bool{}
		for _, b := range hs {
			if b.name == a.name && !b.from.After(a.from) && a.from.Before(b.to) {
				at[owner(b)] = true
			}
		}
		p.overlap = max(p.overlap, len(at))
		if len(at) > p.permits {
			var who []string
			for o := range at {
				who = append(who, o)
			}
			t.Fatalf("exclusion: %d owners hold %q at %v on %d permits: %v",
				len(at), a.name, a.from.Sub(sim.Start), p.permits, who)
		}
	}
	if p.redisson {
		// Redisson keeps no token for a permit (Token is 0): no fencing.
		p.checkJavaExclusion(t, hs)
		p.checkValidity(t)
		p.checkDeadPermits(t)
		p.checkEnds(t)
		return
	}
	// Fencing, in the order the grants ran: one token per owner of a name
	// (per data generation), and with one permit, each new owner's token
	// above every token before it.
	type fence struct {
		gen int
		max uint64
	}
	fences := map[string]*fence{}
	seen := map[string]bool{}
	tokens := map[string]string{}
	for _, h := range hs {
		hold := fmt.Sprintf("%s/%s/%d/%d", owner(h), h.name, h.originGen, h.token)
		if seen[hold] {
			continue // a reentry shares its permit's token
		}
		seen[hold] = true
		k := fmt.Sprintf("%s/%d/%d", h.name, h.originGen, h.token)
		if other, dup := tokens[k]; dup && other != owner(h) {
			t.Fatalf("fencing: token %d on %q given to %s and to %s", h.token, h.name, other, owner(h))
		}
		tokens[k] = owner(h)
		if p.permits == 1 {
			f := fences[h.name]
			if f == nil || f.gen != h.gen {
				f = &fence{gen: h.gen}
				fences[h.name] = f
			}
			if h.token <= f.max {
				t.Fatalf("fencing: %s got token %d on %q after tokens up to %d", owner(h), h.token, h.name, f.max)
			}
			f.max = h.token
		}
	}
	p.checkValidity(t)
	p.checkDeadClients(t, "}:sem:")
	p.checkEnds(t)
}

// semMutantEnv names the script defect TestSemaphoreProperties runs with,
// for TestSemaphorePropertiesCatchBrokenScripts.
const semMutantEnv = "HOLDFAST_TEST_SEM_MUTANT"

// semMutants are deliberate defects of the semaphore's scripts, each of
// which one property check must catch: the script, the text replaced and
// its replacement, and what the failure names.
var semMutants = map[string]struct {
	script    *scripts.Script
	from, to  string
	failsWith string
}{
	// One permit more than asked.
	"exclusion": {scripts.SemAcquireScript, "if others >= permits then", "if others > permits then", "exclusion:"},
	// The counter is read, not moved: two grants share a token.
	"fencing": {scripts.SemAcquireScript, "local token = fence_take(KEYS[3])",
		"local token = fence_peek(KEYS[3])", "fencing:"},
	// The permit's lease key lives half the lease the holder is told of.
	"validity": {scripts.SemAcquireScript, "redis.call('set', lk, token, 'px', lease)",
		"redis.call('set', lk, token, 'px', math.max(1, math.floor(lease / 2)))", "validity:"},
	// A renewal extends every permit of the name, a dead holder's too.
	"dead holder": {scripts.SemRenewScript, "if ttl >= 0 and ttl < lease then redis.call('pexpire', lk, lease) end",
		"local all = redis.call('hgetall', key) for j = 1, #all, 2 do local k = key .. ':sem:' .. all[j] " +
			"local x = redis.call('pttl', k) if x >= 0 and x < lease then redis.call('pexpire', k, lease) end end",
		"still in Redis"},
	// A waiter told to sleep an hour, and no release announced.
	"lost wake-up": {scripts.SemAcquireScript, "return {0, soonest}", "return {0, 3600000}", "liveness:"},
}

// breakSemScript applies the mutant named m and returns what undoes it.
func breakSemScript(t *testing.T, m string) func() {
	mu, ok := semMutants[m]
	if !ok {
		t.Fatalf("no mutant %q", m)
	}
	src := mu.script.Src
	if !strings.Contains(src, mu.from) {
		t.Fatalf("mutant %q: %q is not in %s", m, mu.from, mu.script.Name)
	}
	mu.script.Src = strings.Replace(src, mu.from, mu.to, 1)
	var undo []func()
	undo = append(undo, func() { mu.script.Src = src })
	if m == "lost wake-up" {
		rel := scripts.SemReleaseScript.Src
		scripts.SemReleaseScript.Src = strings.Replace(rel, "redis.call('publish', ARGV[3], 'released')", "", 1)
		undo = append(undo, func() { scripts.SemReleaseScript.Src = rel })
	}
	return func() {
		for _, u := range undo {
			u()
		}
	}
}

// TestSemaphorePropertiesCatchBrokenScripts runs TestSemaphoreProperties in
// a child process once per mutant and requires it to fail with the check
// the mutant breaks: the properties can fail, and each check is the one
// that catches its defect.
func TestSemaphorePropertiesCatchBrokenScripts(t *testing.T) {
	for name, mu := range semMutants {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestSemaphoreProperties$", "-test.count=1",
				"-rapid.checks=2000", "-rapid.nofailfile", "-rapid.shrinktime=2s")
			cmd.Env = append(os.Environ(), semMutantEnv+"="+name)
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

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
