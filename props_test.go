package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/sim"
)

// Property tests of lock safety, run on the deterministic simulator: rapid
// draws a seed, a deployment and a sequence of actions (locks, releases,
// cancellations, time, pauses, failovers, restarts, partitions, lost pub/sub
// messages), and after every action the invariants below are checked against
// the World's history. A failure prints the drawn actions and the seed;
// `go test -run TestLockProperties -rapid.seed=N` replays it, and
// `-rapid.checks=10000` soaks.

// tracked is one Lock the test made.
type tracked struct {
	l         *holdfast.Lock
	client    int
	cancel    context.CancelFunc
	wasHeld   bool // Acquired was closed when last looked at
	lostSeen  bool
	cancelled bool
}

type propWorld struct {
	w            *sim.World
	clients      []*holdfast.Client
	paused       []bool
	locks        []*tracked
	rollback     time.Time // first data roll-back (exclusion is promised before it only)
	lastRollback time.Time
	// stolen: when each name's key was first deleted behind its holder's back.
	stolen map[string]time.Time
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestLockProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := sim.Config{
			Seed:           rapid.Int64().Draw(rt, "seed"),
			Replicas:       rapid.IntRange(0, 2).Draw(rt, "replicas"),
			MaxDelay:       time.Duration(rapid.IntRange(1, 20).Draw(rt, "maxDelayMs")) * time.Millisecond,
			ReplicationLag: time.Duration(rapid.IntRange(1, 50).Draw(rt, "lagMs")) * time.Millisecond,
		}
		p := &propWorld{w: sim.New(cfg), stolen: map[string]time.Time{}}
		for i := 0; i < 3; i++ {
			p.clients = append(p.clients, p.w.NewClient(sim.ClientConfig{
				WatchdogTimeout: time.Duration(rapid.IntRange(300, 3000).Draw(rt, "watchdogMs")) * time.Millisecond,
				// Within the drift allowance (lease/100): exclusion holds.
				Drift: float64(rapid.IntRange(-5, 5).Draw(rt, "drift‰")) / 1000,
				// Local handoffs: off (-1), or a few in a row within a
				// window that virtual time steps can outlast or not.
				HandoffLimit:  rapid.IntRange(-1, 4).Draw(rt, "handoffLimit"),
				HandoffWindow: time.Duration(rapid.IntRange(1, 60000).Draw(rt, "handoffWindowMs")) * time.Millisecond,
			}))
			p.paused = append(p.paused, false)
		}
		rt.Repeat(map[string]func(*rapid.T){
			"lock":      p.lock,
			"crowd":     p.crowd,
			"release":   p.release,
			"cancel":    p.cancel,
			"advance":   p.advance,
			"pause":     p.pause,
			"resume":    p.resume,
			"failover":  p.failover,
			"restart":   p.restart,
			"partition": p.partition,
			"heal":      func(*rapid.T) { p.w.Heal() },
			"droppub":   func(*rapid.T) { p.w.DropPubSub(0.5) },
			"steal":     p.steal,
			"":          p.check,
		})
		p.liveness(rt)
	})
}

func (p *propWorld) lock(t *rapid.T) {
	i := rapid.IntRange(0, len(p.clients)-1).Draw(t, "client")
	name := rapid.SampledFrom([]string{"a", "b"}).Draw(t, "name")
	p.lockOn(t, i, name)
}

// crowd queues several Locks on one name in one client at once: its
// releases hand the lock from one to the next (local handoff).
func (p *propWorld) crowd(t *rapid.T) {
	i := rapid.IntRange(0, len(p.clients)-1).Draw(t, "client")
	name := rapid.SampledFrom([]string{"a", "b"}).Draw(t, "name")
	for n := rapid.IntRange(2, 4).Draw(t, "crowd"); n > 0; n-- {
		p.lockOn(t, i, name)
	}
}

func (p *propWorld) lockOn(t *rapid.T, i int, name string) {
	ctx, cancel := context.WithCancel(context.Background())
	if owner := rapid.SampledFrom([]string{"", "x", "y"}).Draw(t, "owner"); owner != "" {
		ctx = holdfast.WithOwner(ctx, owner)
	}
	var opts []holdfast.Option
	if rapid.Bool().Draw(t, "fixedLease") {
		opts = append(opts, holdfast.WithLease(time.Duration(rapid.IntRange(200, 3000).Draw(t, "leaseMs"))*time.Millisecond))
	}
	switch rapid.IntRange(0, 2).Draw(t, "wait") {
	case 1:
		opts = append(opts, holdfast.WithWait(0))
	case 2:
		opts = append(opts, holdfast.WithWait(time.Duration(rapid.IntRange(1, 5000).Draw(t, "waitMs"))*time.Millisecond))
	}
	l := p.clients[i].Lock(ctx, name, opts...)
	p.locks = append(p.locks, &tracked{l: l, client: i, cancel: cancel})
}

// live returns the tracked Locks not yet over whose client is not paused.
func (p *propWorld) live() []*tracked {
	var out []*tracked
	for _, tr := range p.locks {
		if !isClosed(tr.l.Lost) && !p.paused[tr.client] {
			out = append(out, tr)
		}
	}
	return out
}

func (p *propWorld) release(t *rapid.T) {
	live := p.live()
	if len(live) == 0 {
		t.Skip("no live lock")
	}
	tr := rapid.SampledFrom(live).Draw(t, "lock")
	err := tr.l.Release(context.Background()) // drives the World until it is over
	if !isClosed(tr.l.Lost) {
		t.Fatalf("Release returned %v but the Lock is not over", err)
	}
	if err != nil && !errors.Is(err, holdfast.ErrNotHeld) && !errors.Is(err, holdfast.ErrNotOwner) &&
		!errors.Is(err, holdfast.ErrLeaseExpired) && !errors.Is(err, holdfast.ErrWaitTimeout) {
		// Releases can fail only because the hold was already lost.
		t.Logf("release: %v", err)
	}
	if again := tr.l.Release(context.Background()); !errors.Is(again, holdfast.ErrNotHeld) {
		t.Fatalf("second Release: %v, want ErrNotHeld", again)
	}
}

func (p *propWorld) cancel(t *rapid.T) {
	live := p.live()
	if len(live) == 0 {
		t.Skip("no live lock")
	}
	tr := rapid.SampledFrom(live).Draw(t, "lock")
	if tr.cancelled {
		t.Skip("already cancelled")
	}
	tr.cancelled = true
	// The cancellation arrives from context.AfterFunc's goroutine: wait for
	// it to reach the World's inbox (which only this goroutine drains), so
	// that the run stays deterministic.
	before := p.w.Inbox()
	tr.cancel()
	for p.w.Inbox() == before {
		runtime.Gosched()
	}
}

func (p *propWorld) advance(t *rapid.T) {
	d := time.Duration(rapid.IntRange(1, 4000).Draw(t, "ms")) * time.Millisecond
	p.w.Advance(d)
}

func (p *propWorld) pause(t *rapid.T) {
	i := rapid.IntRange(0, len(p.clients)-1).Draw(t, "client")
	p.w.Pause(p.clients[i])
	p.paused[i] = true
}

func (p *propWorld) resume(t *rapid.T) {
	i := rapid.IntRange(0, len(p.clients)-1).Draw(t, "client")
	p.w.Resume(p.clients[i])
	p.paused[i] = false
}

func (p *propWorld) failover(t *rapid.T) {
	before := p.w.Generation()
	p.w.Failover()
	p.w.Revive()
	p.noteRollback(before)
}

func (p *propWorld) restart(t *rapid.T) {
	if rapid.IntRange(0, 3).Draw(t, "rare") != 0 {
		t.Skip("restarts are rare")
	}
	before := p.w.Generation()
	p.w.RestartPrimary()
	p.noteRollback(before)
}

func (p *propWorld) noteRollback(before int) {
	if p.w.Generation() != before {
		if p.rollback.IsZero() {
			p.rollback = p.w.Now()
		}
		p.lastRollback = p.w.Now()
	}
}

func (p *propWorld) steal(t *rapid.T) {
	name := rapid.SampledFrom([]string{"a", "b"}).Draw(t, "name")
	p.w.Steal(name)
	if _, ok := p.stolen[name]; !ok {
		p.stolen[name] = p.w.Now()
	}
}

func (p *propWorld) partition(t *rapid.T) {
	i := rapid.IntRange(0, len(p.clients)-1).Draw(t, "client")
	p.w.Partition(p.clients[i])
}

// hold is the validity interval of one grant, in World time.
type hold struct {
	client, field, name string
	req                 uint64
	from, to            time.Time
	token               uint64
	gen                 int
	releasing           bool
	granted             time.Time // when the grant ran in Redis
}

// holds rebuilds every grant's interval from the history: from Acquired to
// the earliest of Lost, the holder's giving it up (Release or its context
// ending), and the last validity deadline it was told of.
func holds(w *sim.World) []hold {
	open := map[string]*hold{}
	var out []hold
	key := func(e sim.Event) string { return fmt.Sprintf("%s/%d", e.Client, e.Req) }
	for _, e := range w.History() {
		switch e.Kind {
		case sim.Acquired:
			open[key(e)] = &hold{client: e.Client, field: e.Field, name: e.Name, req: e.Req, from: e.At, to: e.DeadlineAt,
				token: e.Token, gen: e.Generation, granted: e.GrantedAt}
		case sim.Renewed:
			if h := open[key(e)]; h != nil && e.DeadlineAt.After(h.to) && !h.releasing {
				h.to = e.DeadlineAt
			}
		case sim.Releasing:
			// The holder gave the lock up: it no longer acts on it.
			if h := open[key(e)]; h != nil && e.At.Before(h.to) {
				h.to, h.releasing = e.At, true
			}
		case sim.Lost:
			if h := open[key(e)]; h != nil {
				if e.At.Before(h.to) {
					h.to = e.At
				}
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
		if !out[i].from.Equal(out[j].from) {
			return out[i].from.Before(out[j].from)
		}
		if out[i].client != out[j].client {
			return out[i].client < out[j].client
		}
		return out[i].req < out[j].req
	})
	return out
}

func (p *propWorld) check(t *rapid.T) {
	hs := holds(p.w)
	// Exclusion: no two owners validly hold one name at the same instant
	// (before any data roll-back: async replication does not promise it).
	for i := range hs {
		for j := i + 1; j < len(hs); j++ {
			a, b := hs[i], hs[j]
			if a.name != b.name || (a.client == b.client && a.field == b.field) {
				continue
			}
			end := a.to
			if b.to.Before(end) {
				end = b.to
			}
			if !p.rollback.IsZero() && p.rollback.Before(end) {
				end = p.rollback
			}
			if s, ok := p.stolen[a.name]; ok && s.Before(end) {
				end = s // a deleted key lets the next owner in: see the steal checks
			}
			if b.from.Before(end) {
				t.Fatalf("exclusion: %s %s held %q [%v, %v] while %s %s held it [%v, %v]",
					a.client, a.field, a.name, a.from.Sub(sim.Start), a.to.Sub(sim.Start),
					b.client, b.field, b.from.Sub(sim.Start), b.to.Sub(sim.Start))
			}
		}
	}
	// Lost before Redis can give the lock away: no validity deadline a
	// holder is told of lies past the expiry the calls for its hold left in
	// Redis. TTLs are only extended, so the latest expiry any call of the
	// hold (its grant, reentries, renewals: replies may come in any order)
	// has seen bounds the key's life. A hold is one owner's grant with one
	// token, joined by reentries while any of its Locks is held. The check is
	// exact within the data generation the telling call's script ran in;
	// a deadline already told is not told again by a later event, so a
	// roll-back that lost the renewal behind it (which holdfast does not
	// promise to survive) is not charged to the reentry that repeats it.
	type holdSeen struct {
		told    time.Time
		expires map[int]time.Time // by the generation the calls ran in
		open    int
	}
	acquiredAt := map[string]time.Time{}
	byReq := map[string]*holdSeen{}
	byOwner := map[string]*holdSeen{}
	for _, e := range p.w.History() {
		key := fmt.Sprintf("%s/%d", e.Client, e.Req)
		switch e.Kind {
		case sim.Acquired:
			acquiredAt[key] = e.At
			owner := fmt.Sprintf("%s/%s/%s/%d", e.Client, e.Field, e.Name, e.Token)
			h := byOwner[owner]
			if h == nil || h.open == 0 {
				h = &holdSeen{expires: map[int]time.Time{}} // a fresh grant: a new hold
				byOwner[owner] = h
			}
			h.open++
			byReq[key] = h
		case sim.Lost:
			if h := byReq[key]; h != nil {
				h.open--
				delete(byReq, key)
			}
		}
		if h := byReq[key]; h != nil && (e.Kind == sim.Acquired || e.Kind == sim.Renewed) && !e.ExpiresAt.IsZero() {
			if e.ExpiresAt.After(h.expires[e.Generation]) {
				h.expires[e.Generation] = e.ExpiresAt
			}
			if e.DeadlineAt.After(h.told) {
				h.told = e.DeadlineAt
				if bound := h.expires[e.Generation]; e.DeadlineAt.After(bound) {
					t.Fatalf("validity: %s %s was told it holds %q until %v, but Redis expires the key at %v",
						e.Client, e.Field, e.Name, e.DeadlineAt.Sub(sim.Start), bound.Sub(sim.Start))
				}
			}
		}
		// A key deleted behind a holder's back is never renewed for it again
		// by a script that ran after the deletion (unless a data roll-back
		// since brought the key back).
		if s, ok := p.stolen[e.Name]; ok && e.Kind == sim.Renewed && acquiredAt[key].Before(s) &&
			e.RanAt.After(s) && p.lastRollback.Before(s) {
			t.Fatalf("renewal after theft: %s %s renewed %q by a script run at %v, its key deleted at %v",
				e.Client, e.Field, e.Name, e.RanAt.Sub(sim.Start), s.Sub(sim.Start))
		}
	}
	// Fencing: each new owner's token is above the previous owner's, in
	// the order the grants ran in Redis, within one data generation.
	byGrant := append([]hold(nil), hs...)
	sort.SliceStable(byGrant, func(i, j int) bool { return byGrant[i].granted.Before(byGrant[j].granted) })
	last := map[string]hold{}
	for _, h := range byGrant {
		prev, ok := last[h.name]
		if ok && prev.gen == h.gen && (prev.client != h.client || prev.field != h.field) && h.token <= prev.token {
			t.Fatalf("fencing: %s got token %d on %q after %s had %d", h.client, h.token, h.name, prev.client, prev.token)
		}
		last[h.name] = h
	}
	// A Lock that ended never comes back.
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

// liveness stops every fault, lets time pass and requires every pending
// Lock to be granted (then released) or to give up; then it closes the
// clients and requires nothing left behind.
func (p *propWorld) liveness(t *rapid.T) {
	p.w.Heal()
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
			t.Fatalf("liveness: a Lock is still pending after the faults stopped (acquired=%v)", isClosed(tr.l.Acquired))
		}
	}
	for _, c := range p.clients {
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	if n := p.w.Machines(); n != 0 {
		t.Fatalf("%d lock machines alive after Close", n)
	}
	p.w.Advance(10 * time.Second) // anything written past a roll-back expires
	if keys := p.w.Keys(); len(keys) != 0 {
		t.Fatalf("lock keys left in Redis: %v", keys)
	}
}
