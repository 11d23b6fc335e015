package holdfast_test

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/sim"
)

// Property tests of the read-write lock on the deterministic simulator, in
// the style of props_test.go: rapid draws a deployment and a sequence of
// actions (read and write locks, releases, cancellations, time, pauses —
// a paused client is a dead process until resumed —, failovers, restarts,
// partitions, lost messages) and checks after every action:
//
//   - no write hold is valid beside any other owner's hold of the name;
//   - fencing tokens strictly increase per name, grant after grant;
//   - no holder is told of a validity deadline past its hold's own lease
//     key's expiry in Redis;
//   - a dead (paused) client's holds end on their own deadlines: its lease
//     keys are gone from Redis one lease after it stopped, whatever the
//     live readers renew;
//   - a writer's wait: while a WriteLock waits, no reader of its own
//     Client that waits is granted before it (props_rw_wait_test.go);
//   - writer preference: while a WriteLock's claim is in Redis, no new
//     reader of another Client is granted, a Client that holds a read lock
//     included (checkClaim, props_rw_wait_test.go);
//
// and, once the faults stop, that every Lock is granted or gives up and
// nothing is left in Redis. TestRWReadersOverlap and TestRWWriterPreference
// show that readers do share and that a waiting writer is not starved.

// rwMaxLease bounds every lease the properties draw (watchdog or fixed).
const rwMaxLease = 3 * time.Second

type rwTracked struct {
	l         *holdfast.Lock
	client    int
	cancel    context.CancelFunc
	cancelled bool
	wasHeld   bool
	lostSeen  bool
}

type rwWorld struct {
	w        *sim.World
	clients  []*holdfast.Client
	ids      []string
	paused   []bool
	pausedAt []time.Time
	locks    []*rwTracked
	rollback time.Time // first data roll-back: exclusion is promised before it only
	maxDelay time.Duration
	// overlap is the most read holds (or permits) of distinct owners seen
	// valid at once.
	overlap int
	// dataFaults: when failovers and restarts happened (a claim in Redis
	// may be lost in either); pauses: each client's paused spans (a paused
	// client keeps no claim alive), the last open while it is paused.
	dataFaults []time.Time
	pauses     map[int][][2]time.Time
	cutOff     []partitionSpan // partitions, each open (zero to) until healed
	// permits > 0 makes the world a semaphore's (props_sem_test.go): its
	// locks are Semaphore(name, permits) and check judges them as such.
	permits int
	// redisson: the clients use LayoutRedisson (props_sem_redisson_test.go),
	// beside Java-like clients' permits.
	redisson  bool
	java      []*javaPermit
	javaAhead time.Duration // how far the Java-like clients' clock runs ahead
}

// partitionSpan is a client's partition from Redis, from..to (to zero: not healed).
type partitionSpan struct {
	client   int
	from, to time.Time
}

// rwHold is the validity interval of one grant, in World time.
type rwHold struct {
	client, field, name string
	req                 uint64
	from, to            time.Time
	token               uint64
	gen                 int
	granted             time.Time
	// originGen is the data generation the hold began in: a reentry
	// granted while an earlier grant of the same hold (owner, mode, token)
	// was held shares that grant's hold, whatever generation its own
	// script ran in (the hold may have outlived a roll-back on a replica).
	originGen int
	// gaveUp: the holder gave the lock up (Releasing); a deadline its
	// owner's renewal moves afterwards is not its to use.
	gaveUp bool
}

func (h rwHold) write() bool   { return strings.HasSuffix(h.field, ":w") }
func (h rwHold) owner() string { return h.client + "/" + h.field[:len(h.field)-2] }

// rwHolds rebuilds every grant's interval from the history: from Acquired to
// the earliest of Lost, the holder giving it up, and its last deadline.
func rwHolds(w *sim.World) []rwHold {
	open := map[string]*rwHold{}
	var out []rwHold
	key := func(e sim.Event) string { return fmt.Sprintf("%s/%d", e.Client, e.Req) }
	for _, e := range w.History() {
		h := open[key(e)]
		switch e.Kind {
		case sim.Acquired:
			open[key(e)] = &rwHold{client: e.Client, field: e.Field, name: e.Name, req: e.Req, from: e.At,
				to: e.DeadlineAt, token: e.Token, gen: e.Generation, granted: e.GrantedAt}
		case sim.Renewed:
			if h != nil && !h.gaveUp && e.DeadlineAt.After(h.to) {
				h.to = e.DeadlineAt
			}
		case sim.Releasing, sim.Lost:
			if h != nil && e.At.Before(h.to) {
				h.to = e.At
			}
			if h != nil && e.Kind == sim.Releasing {
				h.gaveUp = true
			}
			if h != nil && e.Kind == sim.Lost {
				out = append(out, *h)
				delete(open, key(e))
			}
		}
	}
	for _, h := range open {
		if w.Now().Before(h.to) {
			h.to = w.Now()
		}
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].granted.Equal(out[j].granted) {
			return out[i].granted.Before(out[j].granted)
		}
		return out[i].token < out[j].token
	})
	for i := range out {
		h := &out[i]
		h.originGen = h.gen
		for _, g := range out[:i] { // granted before h
			if g.client == h.client && g.field == h.field && g.name == h.name && g.token == h.token &&
				!g.from.After(h.from) && !g.to.Before(h.from) {
				h.originGen = g.originGen
				break
			}
		}
	}
	return out
}

func newRWWorld(t *rapid.T) *rwWorld {
	cfg := sim.Config{
		Seed:           rapid.Int64().Draw(t, "seed"),
		Replicas:       rapid.IntRange(0, 2).Draw(t, "replicas"),
		MaxDelay:       time.Duration(rapid.IntRange(1, 20).Draw(t, "maxDelayMs")) * time.Millisecond,
		ReplicationLag: time.Duration(rapid.IntRange(1, 50).Draw(t, "lagMs")) * time.Millisecond,
	}
	p := &rwWorld{w: sim.New(cfg), maxDelay: cfg.MaxDelay}
	for i := range 3 {
		id := fmt.Sprintf("c%d", i+1)
		p.clients = append(p.clients, p.w.NewClient(sim.ClientConfig{
			ID:              id,
			WatchdogTimeout: time.Duration(rapid.IntRange(300, int(rwMaxLease/time.Millisecond)).Draw(t, "watchdogMs")) * time.Millisecond,
			Drift:           float64(rapid.IntRange(-5, 5).Draw(t, "drift‰")) / 1000,
		}))
		p.ids = append(p.ids, id)
		p.paused = append(p.paused, false)
		p.pausedAt = append(p.pausedAt, time.Time{})
	}
	return p
}

func TestRWLockProperties(t *testing.T) {
	runs, overlapped := 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		p := newRWWorld(rt)
		actions := p.faultActions()
		actions["read"] = func(t *rapid.T) { p.lock(t, false) }
		actions["write"] = func(t *rapid.T) { p.lock(t, true) }
		actions["readers"] = p.readers
		rt.Repeat(actions)
		p.liveness(rt)
		runs++
		if p.overlap >= 2 {
			overlapped++
		}
	})
	t.Logf("%d of %d runs had read holds of distinct owners valid at once", overlapped, runs)
	if runs >= 20 && overlapped == 0 {
		t.Fatal("readers never overlapped: the property runs do not exercise sharing")
	}
}

// faultActions are the actions every property of this world draws besides
// its locks: releases, cancellations, time, pauses, failovers, restarts,
// partitions, lost messages, and the check after each.
func (p *rwWorld) faultActions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"release": p.release,
		"cancel":  p.cancel,
		"advance": func(t *rapid.T) {
			p.w.Advance(time.Duration(rapid.IntRange(1, 3000).Draw(t, "ms")) * time.Millisecond)
		},
		"pause":  p.pause,
		"resume": p.resume,
		"failover": func(t *rapid.T) {
			before := p.w.Generation()
			p.dataFaults = append(p.dataFaults, p.w.Now())
			p.w.Failover()
			p.w.Revive()
			p.noteRollback(before)
		},
		"restart": func(t *rapid.T) {
			if rapid.IntRange(0, 3).Draw(t, "rare") != 0 {
				t.Skip("restarts are rare")
			}
			before := p.w.Generation()
			p.dataFaults = append(p.dataFaults, p.w.Now())
			p.w.RestartPrimary()
			p.noteRollback(before)
		},
		"partition": func(t *rapid.T) {
			i := rapid.IntRange(0, len(p.clients)-1).Draw(t, "client")
			p.w.Partition(p.clients[i])
			p.cutOff = append(p.cutOff, partitionSpan{client: i, from: p.w.Now()})
		},
		"heal": func(*rapid.T) {
			p.w.Heal()
			for k := range p.cutOff {
				if p.cutOff[k].to.IsZero() {
					p.cutOff[k].to = p.w.Now()
				}
			}
		},
		"droppub": func(*rapid.T) { p.w.DropPubSub(0.5) },
		"":        p.check,
	}
}

func (p *rwWorld) lock(t *rapid.T, write bool) {
	i := rapid.IntRange(0, len(p.clients)-1).Draw(t, "client")
	if p.paused[i] {
		t.Skip("client paused")
	}
	p.lockOn(t, i, rapid.SampledFrom([]string{"a", "b"}).Draw(t, "name"), write)
}

// readers queues read locks on one name from every live client at once.
func (p *rwWorld) readers(t *rapid.T) {
	name := rapid.SampledFrom([]string{"a", "b"}).Draw(t, "name")
	for i := range p.clients {
		if !p.paused[i] {
			p.lockOn(t, i, name, false)
		}
	}
}

func (p *rwWorld) lockOn(t *rapid.T, i int, name string, write bool) {
	ctx, cancel := context.WithCancel(context.Background())
	if owner := rapid.SampledFrom([]string{"", "x", "y"}).Draw(t, "owner"); owner != "" {
		ctx = holdfast.WithOwner(ctx, owner)
	}
	var opts []holdfast.Option
	if rapid.Bool().Draw(t, "fixedLease") {
		opts = append(opts, holdfast.WithLease(time.Duration(rapid.IntRange(200, int(rwMaxLease/time.Millisecond)).Draw(t, "leaseMs"))*time.Millisecond))
	}
	switch rapid.IntRange(0, 2).Draw(t, "wait") {
	case 1:
		opts = append(opts, holdfast.WithWait(0))
	case 2:
		opts = append(opts, holdfast.WithWait(time.Duration(rapid.IntRange(1, 5000).Draw(t, "waitMs"))*time.Millisecond))
	}
	var l *holdfast.Lock
	if p.permits > 0 {
		l = p.clients[i].Semaphore(ctx, name, p.permits, opts...)
	} else if write {
		l = p.clients[i].WriteLock(ctx, name, opts...)
	} else {
		l = p.clients[i].ReadLock(ctx, name, opts...)
	}
	p.locks = append(p.locks, &rwTracked{l: l, client: i, cancel: cancel})
}

func (p *rwWorld) live() []*rwTracked {
	var out []*rwTracked
	for _, tr := range p.locks {
		if !isClosed(tr.l.Lost) && !p.paused[tr.client] {
			out = append(out, tr)
		}
	}
	return out
}

func (p *rwWorld) release(t *rapid.T) {
	live := p.live()
	if len(live) == 0 {
		t.Skip("no live lock")
	}
	tr := rapid.SampledFrom(live).Draw(t, "lock")
	tr.l.Release(context.Background())
	if !isClosed(tr.l.Lost) {
		t.Fatal("Release returned but the Lock is not over")
	}
}

func (p *rwWorld) cancel(t *rapid.T) {
	live := p.live()
	if len(live) == 0 {
		t.Skip("no live lock")
	}
	tr := rapid.SampledFrom(live).Draw(t, "lock")
	if tr.cancelled {
		t.Skip("already cancelled")
	}
	tr.cancelled = true
	before := p.w.Inbox()
	tr.cancel()
	for p.w.Inbox() == before {
		runtime.Gosched()
	}
}

func (p *rwWorld) pause(t *rapid.T) {
	i := rapid.IntRange(0, len(p.clients)-1).Draw(t, "client")
	if !p.paused[i] {
		p.w.Pause(p.clients[i])
		p.paused[i], p.pausedAt[i] = true, p.w.Now()
		if p.pauses == nil {
			p.pauses = map[int][][2]time.Time{}
		}
		p.pauses[i] = append(p.pauses[i], [2]time.Time{p.w.Now(), {}})
	}
}

func (p *rwWorld) resume(t *rapid.T) {
	i := rapid.IntRange(0, len(p.clients)-1).Draw(t, "client")
	p.w.Resume(p.clients[i])
	if n := len(p.pauses[i]); p.paused[i] && n > 0 {
		p.pauses[i][n-1][1] = p.w.Now()
	}
	p.paused[i] = false
}

func (p *rwWorld) noteRollback(before int) {
	if p.w.Generation() != before && p.rollback.IsZero() {
		p.rollback = p.w.Now()
	}
}

func (p *rwWorld) check(t *rapid.T) {
	if p.permits > 0 {
		p.checkSem(t)
		return
	}
	hs := rwHolds(p.w)
	for i, a := range hs {
		// Read holds of distinct owners valid at the instant a began.
		if !a.write() {
			at := map[string]bool{a.owner(): true}
			for _, b := range hs {
				if b.name == a.name && !b.write() && !b.from.After(a.from) && a.from.Before(b.to) {
					at[b.owner()] = true
				}
			}
			p.overlap = max(p.overlap, len(at))
		}
		for _, b := range hs[i+1:] {
			if a.name != b.name || a.owner() == b.owner() || (!a.write() && !b.write()) {
				continue
			}
			start, end := later(a.from, b.from), earlier(a.to, b.to)
			if !p.rollback.IsZero() {
				end = earlier(end, p.rollback)
			}
			if start.Before(end) {
				t.Fatalf("exclusion: %s %s (%s) held %q [%v, %v] while %s %s (%s) held it [%v, %v]",
					a.client, a.field, mode(a), a.name, a.from.Sub(sim.Start), a.to.Sub(sim.Start),
					b.client, b.field, mode(b), b.from.Sub(sim.Start), b.to.Sub(sim.Start))
			}
		}
	}
	// Fencing, in the order the grants ran within one data generation: a
	// write hold's token is above every token granted before it, and every
	// hold's token is above the last write's before it. (A read grant
	// repeated after an ambiguous failure answers its original token at
	// the repeat's time, after readers granted in between: among readers
	// only uniqueness is checked.)
	type fence struct {
		gen       int
		max, last uint64 // the highest token so far; the last write's
	}
	fences := map[string]*fence{}
	seen := map[string]bool{}
	for _, h := range hs {
		hold := fmt.Sprintf("%s/%s/%s/%d/%d", h.client, h.field, h.name, h.originGen, h.token)
		if seen[hold] {
			continue // a reentry shares its hold's token
		}
		seen[hold] = true
		f := fences[h.name]
		if f == nil || f.gen != h.gen {
			f = &fence{gen: h.gen}
			fences[h.name] = f
		}
		if (h.write() && h.token <= f.max) || h.token <= f.last {
			t.Fatalf("fencing: %s %s (%s) got token %d on %q after tokens up to %d (last write %d)",
				h.client, h.field, mode(h), h.token, h.name, f.max, f.last)
		}
		f.max = max(f.max, h.token)
		if h.write() {
			f.last = h.token
		}
	}
	tokens := map[string]string{}
	for hold := range seen {
		parts := strings.Split(hold, "/")
		k := parts[2] + "/" + parts[3] + "/" + parts[4]
		if other, dup := tokens[k]; dup && other != parts[0]+"/"+parts[1] {
			t.Fatalf("fencing: token %s on %q given to %s and to %s/%s", parts[4], parts[2], other, parts[0], parts[1])
		}
		tokens[k] = parts[0] + "/" + parts[1]
	}
	p.checkValidity(t)
	p.checkDeadClients(t, "}:rw:")
	p.checkEnds(t)
	p.checkWriterWait(t)
	p.checkClaim(t)
}

// checkValidity: no holder is told of a validity deadline past its hold's
// own lease key's expiry in Redis.
func (p *rwWorld) checkValidity(t *rapid.T) {
	// Validity: a grant's deadline never lies past its own lease key's
	// expiry, as the granting call left it or a renewal of the hold that
	// ran since the hold began and was answered before the grant (a
	// reentry is told the owner's deadline, which such a renewal may have
	// moved). Checked before any data roll-back: a failover that loses a
	// renewal leaves the holder a deadline the new primary does not know,
	// the documented limit of async replication.
	began := map[string]time.Time{}      // by client/field/name/token: the hold's first grant
	extended := map[string][]sim.Event{} // by client/field/name
	for _, e := range p.w.History() {
		if !p.rollback.IsZero() && !e.At.Before(p.rollback) {
			break
		}
		field := e.Client + "/" + e.Field + "/" + e.Name
		switch e.Kind {
		case sim.Extended:
			extended[field] = append(extended[field], e)
		case sim.Acquired:
			hold := fmt.Sprintf("%s/%d", field, e.Token)
			if _, ok := began[hold]; !ok {
				began[hold] = e.GrantedAt
			}
			if e.ExpiresAt.IsZero() {
				continue
			}
			bound := e.ExpiresAt
			for _, x := range extended[field] {
				if !x.RanAt.Before(began[hold]) && x.ExpiresAt.After(bound) {
					bound = x.ExpiresAt
				}
			}
			if e.DeadlineAt.After(bound) {
				t.Fatalf("validity: %s %s told it holds %q until %v, its lease key expires at %v",
					e.Client, e.Field, e.Name, e.DeadlineAt.Sub(sim.Start), bound.Sub(sim.Start))
			}
		}
	}
}

// checkDeadClients: a paused client's lease keys (infix marks them) are gone
// one lease after it stopped.
func (p *rwWorld) checkDeadClients(t *rapid.T, infix string) {
	// A dead client's holds end on their own deadlines: one lease (plus a
	// call still on the wire when it stopped) after it stopped, none of its
	// lease keys is left, whatever other readers renewed meanwhile.
	for i, id := range p.ids {
		if !p.paused[i] || p.w.Now().Before(p.pausedAt[i].Add(rwMaxLease+2*p.maxDelay)) {
			continue
		}
		for _, k := range p.w.Keys() {
			if strings.Contains(k, infix+id+":") && !strings.HasSuffix(k, ":c") {
				t.Fatalf("hold key %s of client %s, stopped at %v, still in Redis at %v", k, id,
					p.pausedAt[i].Sub(sim.Start), p.w.Now().Sub(sim.Start))
			}
		}
	}
}

// checkEnds: a Lock that ended never comes back, and ends with an error.
func (p *rwWorld) checkEnds(t *rapid.T) {
	for _, tr := range p.locks {
		held := isClosed(tr.l.Acquired)
		if tr.lostSeen && held && !tr.wasHeld {
			t.Fatalf("a Lock that ended with %v was acquired afterwards", tr.l.Err())
		}
		if isClosed(tr.l.Lost) {
			if tr.l.Err() == nil {
				t.Fatal("Lost closed with a nil Err")
			}
			tr.lostSeen = true
		}
		tr.wasHeld = held
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func mode(h rwHold) string {
	if h.write() {
		return "write"
	}
	return "read"
}

// liveness stops every fault and requires every Lock to be granted (then
// released) or to give up, and nothing left in Redis after Close.
func (p *rwWorld) liveness(t *rapid.T) {
	p.w.Heal()
	p.w.DropPubSub(0)
	for i, c := range p.clients {
		p.w.Resume(c)
		p.paused[i] = false
	}
	for round := 0; round < 2*len(p.locks)+5; round++ {
		p.w.Advance(5 * time.Second)
		progress := false
		for _, tr := range p.locks {
			if isClosed(tr.l.Acquired) && !isClosed(tr.l.Lost) {
				tr.l.Release(context.Background())
				progress = true
			}
		}
		if !progress && len(p.live()) == 0 {
			break
		}
	}
	p.check(t)
	for _, tr := range p.locks {
		if !isClosed(tr.l.Lost) {
			var b strings.Builder
			for _, e := range p.w.History() {
				fmt.Fprintf(&b, "\n  %v %v %s %s %s tok=%d err=%v", e.Kind, e.At.Sub(sim.Start), e.Client, e.Name, e.Field, e.Token, e.Err)
			}
			t.Fatalf("liveness: a Lock on c%d is still pending after the faults stopped (acquired=%v)%s\nkeys %v", tr.client+1, isClosed(tr.l.Acquired), b.String(), p.w.Keys())
		}
	}
	for _, c := range p.clients {
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	p.w.Advance(10 * time.Second)
	if p.redisson {
		p.checkSemRedissonLeft(t)
		return
	}
	if keys := p.w.Keys(); len(keys) != 0 {
		t.Fatalf("keys left in Redis: %v", keys)
	}
}
