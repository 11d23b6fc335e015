package holdfast_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/scripts"
	"github.com/holdfast/holdfast/sim"
)

// Property tests of leader election (Elect, and observers of it) on the
// deterministic simulator. Three clients campaign for one name (with the
// watchdog or a fixed lease, waiting, trying once or for a while), resign
// and cancel; each client and a fourth, observing only, watch the name
// (sim.World.Observe: production's observer decisions over simulated reads
// and pub/sub); rapid draws the actions and the faults (time, lease
// expiry, pauses, failovers that may lose the last writes, restarts without
// persistence, partitions, lost pub/sub messages) and checks after every
// action:
//
//   - one leader: at no instant do two owners validly lead (before the first
//     data roll-back, which asynchronous replication does not promise to
//     survive);
//   - terms: every grant's term is greater than every earlier grant's
//     (within one data generation);
//   - observers: the leaders an observer tells never go back in term within
//     one data generation (a leader of the term last told is the same
//     leader), and their reads' generations never go back; a failed read
//     is told once (the state read last, with Err) until a read succeeds;
//
// and that every observer's latest state equals the leader Redis shows
// once that has not changed for electionSettle, with no exception for
// roll-backs: after a roll-back or an empty restart drawn with "settle"
// (the faults then stop), once the faults stop at the end, and once every
// campaign has ended (nobody leads). TestElectionPropertiesCatchBrokenScripts
// shows the script checks failing on broken scripts.
func TestElectionProperties(t *testing.T) {
	if m := os.Getenv(electMutantEnv); m != "" {
		defer breakElectScript(t, m)()
	}
	runs, handovers, regained, failed := 0, 0, 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		p := newElectWorld(rt)
		rt.Repeat(map[string]func(*rapid.T){
			"campaign": p.campaign,
			"resign":   p.resign,
			"cancel":   p.cancel,
			"observe": func(t *rapid.T) {
				i := rapid.IntRange(0, len(p.clients)-1).Draw(t, "client")
				p.observers = append(p.observers, p.w.Observe(p.clients[i], electName))
			},
			"advance": func(t *rapid.T) {
				p.w.Advance(time.Duration(rapid.IntRange(1, 3000).Draw(t, "ms")) * time.Millisecond)
			},
			"pause": func(t *rapid.T) {
				p.w.Pause(p.clients[rapid.IntRange(0, len(p.clients)-1).Draw(t, "client")])
			},
			"resume": func(t *rapid.T) {
				p.w.Resume(p.clients[rapid.IntRange(0, len(p.clients)-1).Draw(t, "client")])
			},
			"failover": func(t *rapid.T) {
				before := p.w.Generation()
				p.w.Failover()
				p.w.Revive()
				p.noteRollback(t, before)
			},
			"restart": func(t *rapid.T) {
				if rapid.IntRange(0, 3).Draw(t, "rare") != 0 {
					t.Skip("restarts are rare")
				}
				before := p.w.Generation()
				p.w.RestartPrimary()
				p.noteRollback(t, before)
			},
			"partition": func(t *rapid.T) {
				p.w.Partition(p.clients[rapid.IntRange(0, len(p.clients)-1).Draw(t, "client")])
			},
			"heal":    func(*rapid.T) { p.w.Heal() },
			"droppub": func(*rapid.T) { p.w.DropPubSub(0.5) },
			"":        p.check,
		})
		p.settle(rt)
		runs++
		if p.handovers > 0 {
			handovers++
		}
		if p.regained > 0 {
			regained++
		}
		if p.failed > 0 {
			failed++
		}
	})
	t.Logf("%d of %d runs had an observer told of a second leader; %d told a leader at or below a term it had told, after a data loss; %d told that a read failed",
		handovers, runs, regained, failed)
	if runs >= 20 && handovers == 0 {
		t.Fatal("no observer ever saw leadership change hands: the runs do not exercise the election")
	}
	if runs >= 500 && (regained == 0 || failed == 0) {
		t.Fatalf("%d runs told a leader of a term passed, %d a failed read: the runs do not exercise roll-backs and failures", regained, failed)
	}
}

const electName = "lead"

// electionSettle is the bound within which an observer's latest state
// equals Redis's, counted from the later of the faults' end and Redis's
// last change: a read that failed before the faults stopped is retried
// after at most lockactor.ObserveMaxBackoff (1 s) following its call
// timeout (200 ms); a change after that reaches an observer in a message
// (or, for an expiry, at its lease's end on a clock drifting by up to
// 5‰ of a lease of at most 3 s), plus a read's round trip.
const electionSettle = 1500 * time.Millisecond

// campaign is one Elect call the test made.
type campaign struct {
	l      *holdfast.Lock
	client int
	value  string
	cancel context.CancelFunc
}

type electWorld struct {
	w         *sim.World
	clients   []*holdfast.Client // the last one only observes
	campaigns []*campaign
	observers []*sim.Observer
	// rollback is when the data first rolled back (zero: never).
	rollback  time.Time
	handovers int
	// regained counts the leaders observers told at or below a term they
	// had told (only a data loss allows it); failed the failed reads told.
	regained, failed int
}

func newElectWorld(t *rapid.T) *electWorld {
	cfg := sim.Config{
		Seed:           rapid.Int64().Draw(t, "seed"),
		Replicas:       rapid.IntRange(0, 2).Draw(t, "replicas"),
		MaxDelay:       time.Duration(rapid.IntRange(1, 20).Draw(t, "maxDelayMs")) * time.Millisecond,
		ReplicationLag: time.Duration(rapid.IntRange(1, 50).Draw(t, "lagMs")) * time.Millisecond,
	}
	p := &electWorld{w: sim.New(cfg)}
	for i := range 4 {
		c := p.w.NewClient(sim.ClientConfig{
			ID:              fmt.Sprintf("c%d", i+1),
			WatchdogTimeout: time.Duration(rapid.IntRange(300, 3000).Draw(t, "watchdogMs")) * time.Millisecond,
			Drift:           float64(rapid.IntRange(-5, 5).Draw(t, "drift‰")) / 1000,
		})
		p.clients = append(p.clients, c)
		p.observers = append(p.observers, p.w.Observe(c, electName))
	}
	return p
}

func (p *electWorld) campaign(t *rapid.T) {
	i := rapid.IntRange(0, len(p.clients)-2).Draw(t, "client")
	var opts []holdfast.Option
	switch rapid.IntRange(0, 3).Draw(t, "wait") {
	case 0:
		opts = append(opts, holdfast.WithWait(0))
	case 1:
		opts = append(opts, holdfast.WithWait(time.Duration(rapid.IntRange(1, 3000).Draw(t, "waitMs"))*time.Millisecond))
	}
	if rapid.Bool().Draw(t, "fixedLease") {
		opts = append(opts, holdfast.WithLease(time.Duration(rapid.IntRange(300, 3000).Draw(t, "leaseMs"))*time.Millisecond))
	}
	ctx, cancel := context.WithCancel(context.Background())
	value := fmt.Sprintf("c%d-%d", i+1, len(p.campaigns))
	p.campaigns = append(p.campaigns, &campaign{l: p.clients[i].Elect(ctx, electName, value, opts...), client: i, value: value, cancel: cancel})
}

// live returns the campaigns not over.
func (p *electWorld) live() []*campaign {
	var out []*campaign
	for _, c := range p.campaigns {
		if !isClosed(c.l.Lost) {
			out = append(out, c)
		}
	}
	return out
}

func (p *electWorld) resign(t *rapid.T) {
	live := p.live()
	if len(live) == 0 {
		t.Skip("no campaign")
	}
	live[rapid.IntRange(0, len(live)-1).Draw(t, "campaign")].l.Release(context.Background())
}

func (p *electWorld) cancel(t *rapid.T) {
	live := p.live()
	if len(live) == 0 {
		t.Skip("no campaign")
	}
	live[rapid.IntRange(0, len(live)-1).Draw(t, "campaign")].cancel()
	p.w.RunUntilIdle()
}

// noteRollback records the first data roll-back; after a roll-back drawn
// with "settle", the faults stop and observers must converge on Redis's
// leader.
func (p *electWorld) noteRollback(t *rapid.T, before int) {
	if p.w.Generation() == before {
		return
	}
	if p.rollback.IsZero() {
		p.rollback = p.w.Now()
	}
	if rapid.Bool().Draw(t, "settle") {
		p.stopFaults()
		p.converge(t, "after a data loss")
	}
}

// stopFaults heals partitions, stops dropping messages and resumes every
// client.
func (p *electWorld) stopFaults() {
	p.w.Heal()
	p.w.DropPubSub(0)
	for _, c := range p.clients {
		p.w.Resume(c)
	}
}

func (p *electWorld) check(t *rapid.T) {
	hs := rwHolds(p.w)
	owner := func(h rwHold) string { return h.client + "/" + h.field }
	// One leader: no two owners' validity intervals overlap.
	for i, a := range hs {
		if !p.rollback.IsZero() && !a.from.Before(p.rollback) {
			continue
		}
		for _, b := range hs[:i] {
			if owner(a) != owner(b) && !b.from.After(a.from) && a.from.Before(b.to) {
				t.Fatalf("one leader: %s (term %d) and %s (term %d) both lead %q at %v",
					owner(b), b.token, owner(a), a.token, a.name, a.from.Sub(sim.Start))
			}
		}
	}
	// Terms: in the order the grants ran, each term above every earlier
	// one of its data generation.
	gen, top := -1, uint64(0)
	for _, h := range hs {
		if h.gen != gen {
			gen, top = h.gen, 0
		}
		if h.token <= top {
			t.Fatalf("terms: %s was granted term %d of %q after terms up to %d", owner(h), h.token, h.name, top)
		}
		top = h.token
	}
	// Observers: a failed read is told once, with the state read last;
	// never back in term within a data generation, nor back in generation.
	for _, o := range p.observers {
		var read holdfast.Leader // the last state told without Err
		failing := false
		for i, st := range o.States() {
			if st.Err != nil {
				if failing || st.Value != read.Value || st.Term != read.Term {
					t.Fatalf("observers: an observer told %+v at %v after %+v (told %+v)",
						st, o.ToldAt(i).Sub(sim.Start), o.States()[max(i-1, 0)], o.States())
				}
				failing = true
				continue
			}
			read, failing = st, false
		}
		gen, top, topValue := -1, uint64(0), ""
		for i, st := range o.States() {
			if st.Err != nil {
				continue
			}
			g := o.Generation(i)
			switch {
			case g < gen:
				t.Fatalf("observers: an observer told %+v, read in data generation %d, after a read of generation %d (told %+v)",
					st, g, gen, o.States())
			case g > gen:
				gen, top, topValue = g, 0, ""
			}
			if st.Term == 0 {
				continue
			}
			if st.Term < top || st.Term == top && st.Value != topValue {
				t.Fatalf("observers: an observer told %+v at %v after a leader %q of term %d in data generation %d (told %+v)",
					st, o.ToldAt(i).Sub(sim.Start), topValue, top, gen, o.States())
			}
			top, topValue = st.Term, st.Value
		}
	}
}

// settle stops the faults and checks that observers converge on Redis's
// state: first with the campaigns left as they are, then once they have
// all ended (nobody leads).
func (p *electWorld) settle(t *rapid.T) {
	p.stopFaults()
	p.converge(t, "after the faults stopped")
	p.check(t)
	for _, o := range p.observers {
		seen := 0
		for _, st := range o.States() {
			if st.Term != 0 && st.Err == nil {
				seen++
			}
		}
		if seen >= 2 {
			p.handovers++
			break
		}
	}
	for _, o := range p.observers {
		top, topValue := uint64(0), ""
		for _, st := range o.States() {
			if st.Err != nil {
				p.failed++
			}
			if st.Err != nil || st.Term == 0 {
				continue
			}
			if st.Term < top || st.Term == top && st.Value != topValue {
				p.regained++
			}
			if st.Term >= top {
				top, topValue = st.Term, st.Value
			}
		}
	}
	for _, c := range p.campaigns {
		c.l.Release(context.Background())
	}
	p.converge(t, "after every campaign ended")
	if st, _, _ := p.w.Leader(electName); st.Term != 0 {
		t.Fatalf("liveness: %+v still leads after every campaign ended", st)
	}
	for _, c := range p.campaigns {
		if !isClosed(c.l.Lost) {
			t.Fatalf("liveness: campaign %s is not over after its Release", c.value)
		}
	}
	p.check(t)
	for _, c := range p.clients {
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
}

// converge advances the World until Redis's leader has not changed for
// electionSettle (looking every 10 ms, for at most a minute) and then
// requires every observer's latest state to equal it.
func (p *electWorld) converge(t *rapid.T, when string) {
	const step = 10 * time.Millisecond
	last, _, _ := p.w.Leader(electName)
	since := p.w.Now()
	for p.w.Now().Sub(since) < electionSettle {
		if p.w.Now().Sub(since) > time.Minute {
			t.Fatalf("liveness: the leader kept changing for a minute %s", when)
		}
		p.w.Advance(step)
		st, _, err := p.w.Leader(electName)
		if err != nil {
			t.Fatalf("reading the leader: %v", err)
		}
		if st != last {
			last, since = st, p.w.Now()
		}
	}
	for i, o := range p.observers {
		if got, ok := o.Latest(); !ok || got != last {
			t.Fatalf("convergence: %s, observer %d shows %+v (told %v) while Redis has shown %+v for %v",
				when, i, got, o.States(), last, electionSettle)
		}
	}
}

// electMutantEnv names the script defect TestElectionProperties runs with,
// for TestElectionPropertiesCatchBrokenScripts.
const electMutantEnv = "HOLDFAST_TEST_ELECT_MUTANT"

// electMutants are deliberate defects of the election's scripts, each of
// which one property check must catch.
var electMutants = map[string]struct {
	script    *scripts.Script
	from, to  string
	failsWith string
}{
	// A candidate is granted while another leads.
	"one leader": {scripts.ElectAcquireScript, "if leader then\n  return {0, redis.call('pttl', key)}\nend",
		"", "one leader:"},
	// The term is read from the fence counter, not taken: two leaders
	// share a term.
	"terms": {scripts.ElectAcquireScript, "local term = fence_take(KEYS[2])",
		"local term = fence_peek(KEYS[2])", "terms:"},
	// A resignation is not announced: observers learn of it only at the
	// end of the lease they last read.
	"silent resignation": {scripts.ElectReleaseScript, "redis.call('publish', ARGV[3], 'vacant:' .. (got[4] or '0'))", "", "convergence:"},
}

// breakElectScript applies the mutant named m and returns what undoes it.
func breakElectScript(t *testing.T, m string) func() {
	mu, ok := electMutants[m]
	if !ok {
		t.Fatalf("no mutant %q", m)
	}
	src := mu.script.Src
	if !strings.Contains(src, mu.from) {
		t.Fatalf("mutant %q: %q is not in %s", m, mu.from, mu.script.Name)
	}
	mu.script.Src = strings.Replace(src, mu.from, mu.to, 1)
	return func() { mu.script.Src = src }
}

// TestElectionPropertiesCatchBrokenScripts runs TestElectionProperties in a
// child process once per mutant and requires it to fail with the check the
// mutant breaks.
func TestElectionPropertiesCatchBrokenScripts(t *testing.T) {
	for name, mu := range electMutants {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestElectionProperties$", "-test.count=1",
				"-rapid.checks=2000", "-rapid.nofailfile", "-rapid.shrinktime=2s")
			cmd.Env = append(os.Environ(), electMutantEnv+"="+name)
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
