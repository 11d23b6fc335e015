package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/sim"
)

// TestFairHandoffLiveness: liveness of the fair lock once faults stop. After
// a prefix of faults (failover, partition, pause, lost messages) the world
// heals and settles; then FairLocks with watchdog or fixed leases queue on
// one name, and each holder either releases after a while or never (its
// lease runs out). Whenever a hold ends — its release ran in Redis, or its
// key expired — while a waiter is queued, the next grant runs in Redis within
// one round trip of that end (2 × MaxDelay), plus the millisecond a PTTL
// cuts off: the queue's head learns of the end by the release's message or
// by a retry timer set for the key's expiry, and confirms in one call.
func TestFairHandoffLiveness(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		maxDelay := time.Duration(rapid.IntRange(1, 20).Draw(rt, "maxDelayMs")) * time.Millisecond
		w := sim.New(sim.Config{
			Seed:           rapid.Int64().Draw(rt, "seed"),
			Replicas:       rapid.IntRange(0, 2).Draw(rt, "replicas"),
			MaxDelay:       maxDelay,
			ReplicationLag: time.Duration(rapid.IntRange(1, 50).Draw(rt, "lagMs")) * time.Millisecond,
		})
		var clients []*holdfast.Client
		var maxWT time.Duration
		for range 3 {
			wt := time.Duration(rapid.IntRange(300, 2000).Draw(rt, "waiterTimeoutMs")) * time.Millisecond
			maxWT = max(maxWT, wt)
			clients = append(clients, w.NewClient(sim.ClientConfig{
				WaiterTimeout:   wt,
				WatchdogTimeout: time.Duration(rapid.IntRange(300, 3000).Draw(rt, "watchdogMs")) * time.Millisecond,
			}))
		}
		ctx := context.Background()
		margin := 5*maxDelay + time.Millisecond

		// Faults first, with FairLocks coming and going.
		var old []*holdfast.Lock
		for n := rapid.IntRange(0, 10).Draw(rt, "faults"); n > 0; n-- {
			c := clients[rapid.IntRange(0, 2).Draw(rt, "client")]
			switch rapid.IntRange(0, 5).Draw(rt, "fault") {
			case 0:
				old = append(old, c.FairLock(ctx, "f", holdfast.WithLease(time.Duration(rapid.IntRange(200, 3000).Draw(rt, "leaseMs"))*time.Millisecond)))
			case 1:
				w.Failover()
				w.Revive()
			case 2:
				w.Partition(c)
			case 3:
				w.Pause(c)
			case 4:
				w.DropPubSub(0.5)
			case 5:
				old = append(old, c.FairLock(ctx, "f"))
			}
			w.Advance(time.Duration(rapid.IntRange(1, 2000).Draw(rt, "ms")) * time.Millisecond)
		}
		w.Heal()
		w.DropPubSub(0)
		for _, c := range clients {
			w.Resume(c)
		}
		for _, l := range old {
			l.Release(ctx)
		}
		w.Advance(3*maxWT + 5*time.Second) // every place, grant and lease of the faults is over
		quiet := w.Now()

		type job struct {
			l         *holdfast.Lock
			hold      time.Duration // how long it holds before its release; < 0: never
			releaseAt time.Time
		}
		var jobs []*job
		for n := rapid.IntRange(2, 6).Draw(rt, "waiters"); n > 0; n-- {
			c := clients[rapid.IntRange(0, 2).Draw(rt, "client")]
			j := &job{hold: time.Duration(rapid.IntRange(0, 2000).Draw(rt, "holdMs")) * time.Millisecond}
			var opts []holdfast.Option
			if rapid.Bool().Draw(rt, "fixedLease") {
				opts = append(opts, holdfast.WithLease(time.Duration(rapid.IntRange(200, 3000).Draw(rt, "leaseMs"))*time.Millisecond))
				if rapid.Bool().Draw(rt, "neverReleased") {
					j.hold = -1
				}
			}
			j.l = c.FairLock(ctx, "f", opts...)
			jobs = append(jobs, j)
			w.Advance(margin)
		}
		for end := w.Now().Add(time.Minute); w.Now().Before(end); {
			done := true
			for _, j := range jobs {
				switch {
				case isClosed(j.l.Lost):
				case isClosed(j.l.Acquired) && j.hold >= 0 && j.releaseAt.IsZero():
					j.releaseAt = w.Now().Add(j.hold)
					done = false
				case isClosed(j.l.Acquired) && j.hold >= 0 && !w.Now().Before(j.releaseAt):
					j.l.Release(ctx)
				default:
					done = false
				}
			}
			if done {
				break
			}
			w.Advance(5 * time.Millisecond)
		}
		for i, j := range jobs {
			if !isClosed(j.l.Lost) {
				rt.Fatalf("liveness: waiter %d still pending (acquired %v) a minute after the faults stopped", i, isClosed(j.l.Acquired))
			}
		}
		// One round trip, a wheel tick (a timer of the production runtime
		// fires up to one tick late; the simulator is exact) and the
		// millisecond a PTTL cuts off.
		checkFairHandoffs(rt, w, quiet, 2*maxDelay+11*time.Millisecond)
	})
}

// checkFairHandoffs checks, from the history after quiet, that each hold of
// "f" that ended while a waiter was queued is followed by a grant within
// bound of its end.
func checkFairHandoffs(t *rapid.T, w *sim.World, quiet time.Time, bound time.Duration) {
	type req struct {
		client          string
		enqueued        time.Time
		granted, ended  time.Time
		end             time.Time // when its hold ended in Redis
		released, taken bool
	}
	byKey := map[string]*req{}
	var all []*req
	for _, e := range w.History() {
		if e.Name != "f" || e.At.Before(quiet) {
			continue
		}
		key := fmt.Sprintf("%s/%d", e.Client, e.Req)
		r := byKey[key]
		switch e.Kind {
		case sim.Enqueued:
			r = &req{client: e.Client, enqueued: e.At}
			byKey[key] = r
			all = append(all, r)
		case sim.Acquired:
			if r != nil && !r.taken {
				r.taken, r.granted, r.end = true, e.GrantedAt, e.ExpiresAt
			}
		case sim.Renewed:
			if r != nil && e.ExpiresAt.After(r.end) {
				r.end = e.ExpiresAt
			}
		case sim.Lost:
			if r != nil {
				r.ended = e.At
				if errors.Is(e.Err, holdfast.ErrReleased) && r.taken && !e.RanAt.IsZero() {
					r.released, r.end = true, e.RanAt
				}
			}
		}
	}
	var grants []time.Time
	for _, r := range all {
		if r.taken {
			grants = append(grants, r.granted)
		}
	}
	sort.Slice(grants, func(i, j int) bool { return grants[i].Before(grants[j]) })
	for _, h := range all {
		if !h.taken {
			continue
		}
		end := h.end
		waiting := false
		for _, r := range all {
			if r != h && !r.enqueued.After(end.Add(-bound)) && (!r.taken || r.granted.After(end)) {
				waiting = true
			}
		}
		if !waiting {
			continue
		}
		// The next grant after h's: it may come before end when h's key
		// went earlier than its expiry (a release the lease's end sent).
		i := sort.Search(len(grants), func(i int) bool { return grants[i].After(h.granted) })
		if i == len(grants) || grants[i].Sub(end) > bound {
			next := "never"
			if i < len(grants) {
				next = grants[i].Sub(end).String() + " after"
			}
			how := "expired"
			if h.released {
				how = "released"
			}
			t.Fatalf("fair handoff: %s's hold %s at %v with waiters queued; the next grant ran %s (bound %v)%s",
				h.client, how, end.Sub(sim.Start), next, bound, historyAround(w, "f", end.Add(-3*time.Second), end.Add(bound+time.Second)))
		}
	}
}

// historyAround renders the events of name between from and to.
func historyAround(w *sim.World, name string, from, to time.Time) string {
	var b strings.Builder
	for _, e := range w.History() {
		if e.Name == name && !e.At.Before(from) && !e.At.After(to) {
			fmt.Fprintf(&b, "\n  %v %v %s req=%d %s granted=%v ran=%v expires=%v err=%v", e.At.Sub(sim.Start), e.Kind, e.Client, e.Req, e.Field,
				e.GrantedAt.Sub(sim.Start), e.RanAt.Sub(sim.Start), e.ExpiresAt.Sub(sim.Start), e.Err)
		}
	}
	return b.String()
}
