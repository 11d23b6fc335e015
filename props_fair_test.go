package holdfast_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/sim"
)

// Property tests of the fair lock, on the same simulator, faults and
// invariants as TestLockProperties (exclusion, validity, fencing, a Lock
// that ended never comes back, liveness once faults stop, nothing left in
// Redis), plus the fair lock's own: waiters are granted in the order they
// asked, as long as they stayed live and connected. FairLocks use the name
// "f"; plain Locks on "f" are refused with ErrWrongKind while it is in use
// as fair, and plain Locks on "a" run beside them.

// fairWorld adds to propWorld what the FIFO check needs to know: when each
// client was cut off (paused or partitioned), and when data was rolled back
// or the primary changed.
type fairWorld struct {
	*propWorld
	// cuts: the intervals in which each client was paused or partitioned
	// (to is zero while the cut lasts).
	cuts [][]cut
	// failAt: failovers and restarts (the queue may be rolled back, and
	// calls in flight fail).
	failAt []time.Time
	// margin: requests asked closer together than this may reach Redis in
	// either order (a one-way delay, and up to two round trips behind the
	// client's earlier place call).
	margin time.Duration
	// lag: the replication lag; a write this much older than a failover
	// may be lost by it.
	lag time.Duration
	// maxWT: the longest WaiterTimeout of the clients; a place nobody keeps
	// alive lapses within it.
	maxWT time.Duration
	// layout: the Clients' Config.Layout.
	layout holdfast.Layout
	// anonymous reports whether an owner field is an anonymous Lock's (not
	// a WithOwner owner's, whose reentries may overtake); nil: holdfast's
	// layout's fields.
	anonymous func(field string) bool
}

type cut struct {
	from, to  time.Time
	partition bool
}

func TestFairLockProperties(t *testing.T) { fairProperties(t, holdfast.LayoutHoldfast, nil) }

// fairProperties runs the fair lock's properties with the given layout;
// setup, when set, completes each run's world.
func fairProperties(t *testing.T, layout holdfast.Layout, setup func(*fairWorld)) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := sim.Config{
			Seed:           rapid.Int64().Draw(rt, "seed"),
			Replicas:       rapid.IntRange(0, 2).Draw(rt, "replicas"),
			MaxDelay:       time.Duration(rapid.IntRange(1, 20).Draw(rt, "maxDelayMs")) * time.Millisecond,
			ReplicationLag: time.Duration(rapid.IntRange(1, 50).Draw(rt, "lagMs")) * time.Millisecond,
		}
		p := &propWorld{w: sim.New(cfg), oneTry: simCallTimeout + 2*cfg.MaxDelay + 20*time.Millisecond}
		f := &fairWorld{propWorld: p, margin: 5*cfg.MaxDelay + time.Millisecond, lag: cfg.ReplicationLag, layout: layout}
		for i := 0; i < 3; i++ {
			watchdog := time.Duration(rapid.IntRange(300, 3000).Draw(rt, "watchdogMs")) * time.Millisecond
			wt := time.Duration(rapid.IntRange(300, 2000).Draw(rt, "waiterTimeoutMs")) * time.Millisecond
			f.maxWT = max(f.maxWT, wt)
			p.clients = append(p.clients, p.w.NewClient(sim.ClientConfig{
				WatchdogTimeout: watchdog,
				WaiterTimeout:   wt,
				Drift:           float64(rapid.IntRange(-5, 5).Draw(rt, "drift‰")) / 1000,
				Layout:          layout,
			}))
			p.paused = append(p.paused, false)
			f.cuts = append(f.cuts, nil)
		}
		if setup != nil {
			setup(f)
		}
		rt.Repeat(map[string]func(*rapid.T){
			"fair":      f.fair,
			"crowd":     f.crowd,
			"plain":     f.plain,
			"release":   p.release,
			"cancel":    p.cancel,
			"advance":   p.advance,
			"pause":     f.pause,
			"resume":    f.resume,
			"failover":  f.failover,
			"restart":   f.restart,
			"partition": f.partition,
			"heal":      f.heal,
			"droppub":   func(*rapid.T) { p.w.DropPubSub(0.5) },
			"":          f.check,
		})
		f.check(rt)
		p.liveness(rt)
	})
}

// fair asks for a FairLock on "f". Time then moves on past the network's
// delay, so that requests reach Redis in the order they were made.
func (f *fairWorld) fair(t *rapid.T) {
	i := rapid.IntRange(0, len(f.clients)-1).Draw(t, "client")
	f.fairOn(t, i)
	f.w.Advance(f.margin + time.Millisecond)
}

// crowd queues several FairLocks of one client at once: each takes its own
// place in Redis.
func (f *fairWorld) crowd(t *rapid.T) {
	i := rapid.IntRange(0, len(f.clients)-1).Draw(t, "client")
	for n := rapid.IntRange(2, 4).Draw(t, "crowd"); n > 0; n-- {
		f.fairOn(t, i)
		f.w.Advance(f.margin + time.Millisecond)
	}
}

func (f *fairWorld) fairOn(t *rapid.T, i int) {
	ctx, cancel := context.WithCancel(context.Background())
	owner := rapid.SampledFrom([]string{"", "", "x"}).Draw(t, "owner")
	if owner != "" {
		ctx = holdfast.WithOwner(ctx, owner) // reentry: the one allowed overtaking
	}
	var opts []holdfast.Option
	if rapid.Bool().Draw(t, "fixedLease") {
		opts = append(opts, holdfast.WithLease(time.Duration(rapid.IntRange(200, 3000).Draw(t, "leaseMs"))*time.Millisecond))
	}
	tryOnce := false
	switch rapid.IntRange(0, 3).Draw(t, "wait") {
	case 1:
		tryOnce = true
		opts = append(opts, holdfast.WithWait(0))
	case 2:
		opts = append(opts, holdfast.WithWait(time.Duration(rapid.IntRange(1, 5000).Draw(t, "waitMs"))*time.Millisecond))
	}
	l := f.clients[i].FairLock(ctx, "f", opts...)
	f.locks = append(f.locks, &tracked{l: l, client: i, cancel: cancel, tryOnce: tryOnce, at: f.w.Now(), paused: f.paused[i]})
}

// plain asks for a plain Lock on "f" (refused while "f" is used as fair)
// or on "a".
func (f *fairWorld) plain(t *rapid.T) {
	i := rapid.IntRange(0, len(f.clients)-1).Draw(t, "client")
	names := []string{"a", "f"}
	if f.layout == holdfast.LayoutRedisson {
		// An RLock on an RFairLock's name does not queue (in Redisson
		// too): not a use the layout supports.
		names = names[:1]
	}
	name := rapid.SampledFrom(names).Draw(t, "name")
	ctx, cancel := context.WithCancel(context.Background())
	l := f.clients[i].Lock(ctx, name, holdfast.WithWait(time.Duration(rapid.IntRange(0, 3000).Draw(t, "waitMs"))*time.Millisecond))
	f.locks = append(f.locks, &tracked{l: l, client: i, cancel: cancel})
}

func (f *fairWorld) pause(t *rapid.T) {
	i := rapid.IntRange(0, len(f.clients)-1).Draw(t, "client")
	f.w.Pause(f.clients[i])
	f.paused[i] = true
	for _, tr := range f.locks {
		if tr.client == i {
			tr.paused = true
		}
	}
	f.cuts[i] = append(f.cuts[i], cut{from: f.w.Now()})
}

func (f *fairWorld) resume(t *rapid.T) {
	i := rapid.IntRange(0, len(f.clients)-1).Draw(t, "client")
	f.w.Resume(f.clients[i])
	f.paused[i] = false
	f.endCuts(i, false)
}

func (f *fairWorld) partition(t *rapid.T) {
	i := rapid.IntRange(0, len(f.clients)-1).Draw(t, "client")
	f.w.Partition(f.clients[i])
	f.cuts[i] = append(f.cuts[i], cut{from: f.w.Now(), partition: true})
}

func (f *fairWorld) heal(*rapid.T) {
	f.w.Heal()
	for i := range f.cuts {
		f.endCuts(i, true)
	}
}

// endCuts ends client i's open cuts of one sort (partitions or pauses).
func (f *fairWorld) endCuts(i int, partition bool) {
	for j := range f.cuts[i] {
		if c := &f.cuts[i][j]; c.to.IsZero() && c.partition == partition {
			c.to = f.w.Now()
		}
	}
}

func (f *fairWorld) failover(t *rapid.T) {
	f.propWorld.failover(t)
	f.failAt = append(f.failAt, f.w.Now())
}

func (f *fairWorld) restart(t *rapid.T) {
	f.propWorld.restart(t)
	f.failAt = append(f.failAt, f.w.Now())
}

// fairReq is one FairLock as the history tells it.
type fairReq struct {
	client, field string
	clientIdx     int
	enqueued      time.Time
	// queued: when it could ask the queue, as the check judges a waiter:
	// its request, or later when it waited on its client first (see
	// checkFIFO).
	queued  time.Time
	granted time.Time // when its grant ran in Redis (zero: never)
	ended   time.Time // when it was lost (zero: not yet)
}

func (f *fairWorld) check(t *rapid.T) {
	f.propWorld.check(t)
	f.checkFIFO(t)
}

// checkFIFO: when a waiter B is granted "f", no waiter A that asked before
// it (by more than the margin) is still waiting, unless A's client was cut off (paused, partitioned)
// or the primary changed between A's request and B's grant, or B is a
// reentry (an owner given by WithOwner), or A only tried once. A new
// request never overtakes a queued one (no barging), and a live waiter is
// never dropped from the queue (it would come back behind later ones).
func (f *fairWorld) checkFIFO(t *rapid.T) {
	ids := f.w.Clients()
	index := map[string]int{}
	for i, id := range ids {
		index[id] = i
	}
	reqs := map[string]*fairReq{}
	var order []*fairReq
	// failed holds the times each client's calls on the name failed: a
	// waiter whose place call was lost reached Redis only when it was
	// repeated, and FIFO is the order in which requests reached Redis. A
	// waiter's place goes out when it asks, whatever its client's other
	// calls in flight, so only a failure after it asked can delay it.
	failed := map[string][]time.Time{}
	failedWithin := func(client string, from, to time.Time) bool {
		for _, at := range failed[client] {
			if !at.Before(from) && !at.After(to) {
				return true
			}
		}
		return false
	}
	plain := map[string]*fairReq{}
	for _, e := range f.w.History() {
		if e.Name != "f" {
			continue
		}
		key := fmt.Sprintf("%s/%d", e.Client, e.Req)
		switch e.Kind {
		case sim.Enqueued:
			if e.Lock != "fair" {
				// A plain Lock on "f" waits outside the fair queue.
				plain[key] = &fairReq{client: e.Client, enqueued: e.At}
				continue
			}
			r := &fairReq{client: e.Client, field: e.Field, clientIdx: index[e.Client], enqueued: e.At, queued: e.At}
			reqs[key] = r
			order = append(order, r)
		case sim.Acquired:
			if r := reqs[key]; r != nil && r.granted.IsZero() {
				r.granted = e.GrantedAt
			}
		case sim.Lost:
			if r := reqs[key]; r != nil {
				r.ended = e.At
			}
			if r := plain[key]; r != nil {
				r.ended = e.At
			}
		case sim.CallFailed:
			failed[e.Client] = append(failed[e.Client], e.At)
		}
	}
	// A fair request that asks while a plain Lock of its client on "f" is
	// pending, or while the call of one that gave up may still be in flight
	// (it is answered or times out within the call timeout), waits aside
	// until Redis has answered which kind "f" is: it asks, as far as the
	// queue can tell, only then.
	for _, a := range order {
		for _, p := range plain {
			busy := p.ended
			if !busy.IsZero() {
				busy = busy.Add(simCallTimeout)
			}
			if p.client == a.client && !p.enqueued.After(a.enqueued) && (busy.IsZero() || busy.After(a.enqueued)) {
				if busy.IsZero() {
					a.queued = never
				} else if busy.After(a.queued) {
					a.queued = busy
				}
			}
		}
	}
	// A request that asks while an earlier request of its client and owner
	// field holds, or is releasing, waits for that owner: as a reentry, or,
	// once the hold is going, behind the owner's call in flight (a fresh
	// grant of a field never crosses one). It asks the queue only when that
	// hold has ended.
	for i, a := range order {
		for _, e := range order[:i] {
			if e.client == a.client && e.field == a.field && !e.granted.IsZero() && e.granted.Before(a.enqueued) &&
				(e.ended.IsZero() || e.ended.After(a.enqueued)) {
				if e.ended.IsZero() {
					a.queued = never
				} else if e.ended.After(a.queued) {
					a.queued = e.ended
				}
			}
		}
	}
	// A request of a client and owner field that gave up leaves an undo of
	// the field (its place, or a grant it may have had), which, when a call
	// of its client fails after the request began, may be repeated until it
	// lands or the lease it covers runs out: a later request of the same field takes no place
	// while it is pending (the undo could remove it), so it asks the queue
	// only when that undo is over — which the history does not show: it is
	// judged from the end of the longest such undo.
	for i, a := range order {
		for _, e := range order[:i] {
			if e.client != a.client || e.field != a.field || e.ended.IsZero() || e.ended.After(a.enqueued) ||
				!failedWithin(a.client, e.enqueued, a.enqueued) {
				continue
			}
			if until := e.ended.Add(max(fairMaxLease, f.maxWT) + simCallTimeout); until.After(a.enqueued) && until.After(a.queued) {
				a.queued = until
			}
		}
	}
	// A place in Redis belongs to an owner field: a request that asks while
	// an earlier request of its client and field waits shares that one's
	// place, and what delayed or lost that place (a cut, a failed call, a
	// roll-back since it was taken) delays it too.
	since := make([]time.Time, len(order)) // when each request's place was taken
	for i, a := range order {
		since[i] = a.enqueued
		for _, e := range order[:i] {
			if e.client == a.client && e.field == a.field && e.enqueued.Before(since[i]) &&
				(e.granted.IsZero() || e.granted.After(a.enqueued)) && (e.ended.IsZero() || e.ended.After(a.enqueued)) {
				since[i] = e.enqueued
			}
		}
	}
	for j, b := range order {
		anonymous := strings.Contains(b.field, ":~")
		if f.anonymous != nil {
			anonymous = f.anonymous(b.field)
		}
		if b.granted.IsZero() || !anonymous || f.staleOfClient(order, b.client, b.granted) {
			continue
		}
		for i, a := range order[:j] {
			if !a.queued.Before(b.enqueued) || f.cutWithin(a.clientIdx, since[i], b.granted) ||
				f.failedBetween(since[i], b.granted) || failedWithin(a.client, since[i], b.granted) {
				continue
			}
			waiting := (a.granted.IsZero() || a.granted.After(b.granted)) && (a.ended.IsZero() || a.ended.After(b.granted))
			if waiting && a.queued.Add(f.margin).Before(b.enqueued) {
				t.Fatalf("fifo: %s %s (asked at %v) granted at %v while %s %s, asked at %v, still waited",
					b.client, b.field, b.enqueued.Sub(sim.Start), b.granted.Sub(sim.Start),
					a.client, a.field, a.enqueued.Sub(sim.Start))
			}
		}
	}
}

// never is a time after every World time.
var never = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// staleOfClient reports whether a failover before t may have brought back a
// place in the queue that client had given up: one of its requests waited
// until shortly (the replication lag and a round trip) before the failover,
// and the failover came within the longest WaiterTimeout before t (a place
// nobody keeps alive lapses by then).
// A rolled-back place keeps its old turn, and the client's next request of
// that field, or the head of its local queue (which takes a grant to any
// waiter of its client behind it), may be granted on it before waiters that
// asked after the roll-back.
func (f *fairWorld) staleOfClient(order []*fairReq, client string, t time.Time) bool {
	for _, tf := range f.failAt {
		if tf.After(t) || tf.Before(t.Add(-f.maxWT-f.margin)) {
			continue // after the grant, or long enough before it that a stale place lapsed
		}
		for _, r := range order {
			if r.client == client && r.enqueued.Before(tf) && (r.ended.IsZero() || r.ended.After(tf.Add(-f.lag-f.margin))) {
				return true
			}
		}
	}
	return false
}

// cutWithin reports whether client i was cut off at any time in [from, to].
func (f *fairWorld) cutWithin(i int, from, to time.Time) bool {
	for _, c := range f.cuts[i] {
		if !c.from.After(to) && (c.to.IsZero() || !c.to.Before(from)) {
			return true
		}
	}
	return false
}

func (f *fairWorld) failedBetween(from, to time.Time) bool {
	for _, c := range f.failAt {
		if !c.Before(from) && !c.After(to) {
			return true
		}
	}
	return false
}

// fairMaxLease bounds the leases and watchdog timeouts the fair property draws.
const fairMaxLease = 3 * time.Second
