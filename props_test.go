package holdfast_test

import (
	"context"
	"errors"
	"runtime"
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
	l       *holdfast.Lock
	client  int
	cancel  context.CancelFunc
	wasHeld bool // Acquired was closed when last looked at
	// tryOnce: WithWait(0), made at World time at; paused: its client was
	// paused since (its calls wait for the resume).
	tryOnce   bool
	at        time.Time
	paused    bool
	lostSeen  bool
	cancelled bool
}

type propWorld struct {
	w       *sim.World
	clients []*holdfast.Client
	paused  []bool
	locks   []*tracked
	// oneTry bounds a try-once Lock's life in virtual time: one call (its
	// answer, or its timeout) and nothing more.
	oneTry time.Duration
	// settle, when set, runs after the Clients closed, before the check
	// that nothing is left in Redis (a layout whose keys wait for a look).
	settle func(t *rapid.T)
}

// simCallTimeout is sim.Config's default CallTimeout.
const simCallTimeout = 200 * time.Millisecond

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestLockProperties(t *testing.T) { lockProperties(t, holdfast.LayoutHoldfast) }

// TestLockPropertiesRedisson: the same property with the Redisson layout's
// scripts (Config.Layout = LayoutRedisson).
func TestLockPropertiesRedisson(t *testing.T) { lockProperties(t, holdfast.LayoutRedisson) }

func lockProperties(t *testing.T, layout holdfast.Layout) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := sim.Config{
			Seed:           rapid.Int64().Draw(rt, "seed"),
			Replicas:       rapid.IntRange(0, 2).Draw(rt, "replicas"),
			MaxDelay:       time.Duration(rapid.IntRange(1, 20).Draw(rt, "maxDelayMs")) * time.Millisecond,
			ReplicationLag: time.Duration(rapid.IntRange(1, 50).Draw(rt, "lagMs")) * time.Millisecond,
		}
		p := &propWorld{w: sim.New(cfg), oneTry: simCallTimeout + 2*cfg.MaxDelay + 20*time.Millisecond}
		for i := 0; i < 3; i++ {
			p.clients = append(p.clients, p.w.NewClient(sim.ClientConfig{
				WatchdogTimeout: time.Duration(rapid.IntRange(300, 3000).Draw(rt, "watchdogMs")) * time.Millisecond,
				// Within the drift allowance (lease/100): exclusion holds.
				Drift: float64(rapid.IntRange(-5, 5).Draw(rt, "drift‰")) / 1000,
				// Local handoffs: off (-1), or a few in a row within a
				// window that virtual time steps can outlast or not.
				HandoffLimit:  rapid.IntRange(-1, 4).Draw(rt, "handoffLimit"),
				HandoffWindow: time.Duration(rapid.IntRange(1, 60000).Draw(rt, "handoffWindowMs")) * time.Millisecond,
				Layout:        layout,
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
	owner := rapid.SampledFrom([]string{"", "x", "y"}).Draw(t, "owner")
	if owner != "" {
		ctx = holdfast.WithOwner(ctx, owner)
	}
	var opts []holdfast.Option
	if rapid.Bool().Draw(t, "fixedLease") {
		opts = append(opts, holdfast.WithLease(time.Duration(rapid.IntRange(200, 3000).Draw(t, "leaseMs"))*time.Millisecond))
	}
	tryOnce := false
	switch rapid.IntRange(0, 2).Draw(t, "wait") {
	case 1:
		tryOnce = true
		opts = append(opts, holdfast.WithWait(0))
	case 2:
		opts = append(opts, holdfast.WithWait(time.Duration(rapid.IntRange(1, 5000).Draw(t, "waitMs"))*time.Millisecond))
	}
	l := p.clients[i].Lock(ctx, name, opts...)
	p.locks = append(p.locks, &tracked{l: l, client: i, cancel: cancel, tryOnce: tryOnce, at: p.w.Now(), paused: p.paused[i]})
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
	for _, tr := range p.locks {
		if tr.client == i {
			tr.paused = true
		}
	}
}

func (p *propWorld) resume(t *rapid.T) {
	i := rapid.IntRange(0, len(p.clients)-1).Draw(t, "client")
	p.w.Resume(p.clients[i])
	p.paused[i] = false
}

func (p *propWorld) failover(t *rapid.T) {
	p.w.Failover()
	p.w.Revive()
}

func (p *propWorld) restart(t *rapid.T) {
	if rapid.IntRange(0, 3).Draw(t, "rare") != 0 {
		t.Skip("restarts are rare")
	}
	p.w.RestartPrimary()
}

func (p *propWorld) steal(t *rapid.T) {
	name := rapid.SampledFrom([]string{"a", "b"}).Draw(t, "name")
	p.w.Steal(name)
}

func (p *propWorld) partition(t *rapid.T) {
	i := rapid.IntRange(0, len(p.clients)-1).Draw(t, "client")
	p.w.Partition(p.clients[i])
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
	if p.settle != nil {
		p.settle(t)
	}
	if keys := p.w.Keys(); len(keys) != 0 {
		t.Fatalf("lock keys left in Redis: %v", keys)
	}
}
