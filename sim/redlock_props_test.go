package sim_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/scripts"
	"github.com/holdfast/holdfast/sim"
)

// TestRedLockLivenessProperties: liveness of RedLock, in virtual time, over
// 3 or 5 deployments of which a minority (drawn once per run) suffers any
// fault (down, revived, restarted empty, failed over losing writes — a node
// that lost data stays away for at least a lease, Redlock's delayed
// restart), while the majority stays reachable and keeps its data:
//
//   - (a) a RedLock, once held, stays held (Lost stays open, the deadline
//     stays ahead) until its holder releases it: it holds every node that
//     grants and renews on all of them, so no minority fault can end it;
//   - (b) a one-try RedLock (WithWait(0)) of a rival ends within two round
//     trips: the holder's nodes' refusals put a majority out of reach, so
//     the round ends without waiting for a node that does not answer (not
//     a call's timeout, never a round's wait), and what the rival took is
//     given back;
//   - (c) Release returns within a call's timeout and two round trips,
//     whatever the faulty nodes do, never after a lease;
//   - exclusion: the rival is never granted while the holder holds.
func TestRedLockLivenessProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.SampledFrom([]int{3, 5}).Draw(rt, "nodes")
		maxDelay := time.Duration(rapid.IntRange(1, 10).Draw(rt, "maxDelayMs")) * time.Millisecond
		const callTimeout = 200 * time.Millisecond
		w := sim.New(sim.Config{
			Seed:        rapid.Int64().Draw(rt, "seed"),
			MaxDelay:    maxDelay,
			CallTimeout: callTimeout,
		})
		lease := time.Duration(rapid.IntRange(300, 3000).Draw(rt, "watchdogMs")) * time.Millisecond
		faulty := rapid.IntRange(1, n-(n/2+1)).Draw(rt, "faulty") // nodes 0..faulty-1
		var deps []*sim.Deployment
		var holderClients, rivalClients []*holdfast.Client
		for i := 0; i < n; i++ {
			d := w.NewDeployment()
			deps = append(deps, d)
			holderClients = append(holderClients, d.NewClient(sim.ClientConfig{ID: "h" + strconv.Itoa(i), WatchdogTimeout: lease}))
			rivalClients = append(rivalClients, d.NewClient(sim.ClientConfig{ID: "r" + strconv.Itoa(i), WatchdogTimeout: lease}))
		}
		holder := holdfast.RedLock(context.Background(), holderClients, "ledger")
		for i := 0; i < 400 && !acquired(holder); i++ {
			w.Advance(5 * time.Millisecond)
		}
		if !acquired(holder) || lost(holder) {
			rt.Fatalf("the RedLock was not granted with every node up: %v", holder.Err())
		}
		// A one-try RedLock: its calls' answers, then the release of what
		// it took, plus the wheel's ticks.
		bound := 4*maxDelay + 30*time.Millisecond
		// awayUntil: when each node that lost its data may answer again.
		// A Revive does not cut that short: an empty node that rejoins at
		// once breaks Redlock's delayed restart, the documented condition of
		// exclusion, and lets a rival take a majority while the holder's
		// third grant is in flight (seed 8668585117859289460: Restart,
		// then Revive at once, then a rival granted).
		awayUntil := make([]time.Time, n)
		held := func(t *rapid.T) {
			if lost(holder) {
				t.Fatalf("the RedLock was lost at %v with a majority of its nodes up and intact: %v", w.Now().Sub(sim.Start), holder.Err())
			}
			if !w.Now().Before(holder.Deadline()) {
				t.Fatalf("the RedLock's deadline %v passed at %v", holder.Deadline().Sub(sim.Start), w.Now().Sub(sim.Start))
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"advance": func(t *rapid.T) {
				w.Advance(time.Duration(rapid.IntRange(1, 2000).Draw(t, "ms")) * time.Millisecond)
			},
			"fault": func(t *rapid.T) {
				i := rapid.IntRange(0, faulty-1).Draw(t, "node")
				d := deps[i]
				// A node that loses its data stays away for a lease before
				// it answers again (Redlock's delayed restart, which the
				// docs name as the condition of exclusion).
				away := lease + time.Duration(rapid.IntRange(0, 3000).Draw(t, "awayMs"))*time.Millisecond
				switch rapid.IntRange(0, 3).Draw(t, "fault") {
				case 0:
					d.Down()
				case 1:
					if !w.Now().Before(awayUntil[i]) {
						d.Revive()
					}
				case 2:
					d.Restart(away)
					awayUntil[i] = w.Now().Add(away)
				case 3:
					if d.Failover(away) {
						awayUntil[i] = w.Now().Add(away)
					}
				}
			},
			"tryonce": func(t *rapid.T) {
				held(t)
				// Two round trips suffice when the holder's keys on the
				// nodes that are up refuse enough of the rival's calls to
				// put a majority out of reach. A RedLock is Acquired once a
				// majority grants, so a node may not hold the holder's key
				// (still on its way, or retaken later); then the round may
				// need a silent node's answer, bounded by a call's timeout.
				refusals, limit := 0, bound
				for _, d := range deps {
					v := d.Node().Do("GET", scripts.LockKey("ledger"))
					if h, ok := scripts.ParseHold(v.Str); d.Up() && ok && strings.HasPrefix(h.Field, "h") {
						refusals++
					}
				}
				if refusals < n-(n/2+1)+1 {
					limit = callTimeout + bound
				}
				start := w.Now()
				rival := holdfast.RedLock(context.Background(), rivalClients, "ledger", holdfast.WithWait(0))
				for !lost(rival) && !acquired(rival) && w.Now().Sub(start) <= limit {
					w.Advance(time.Millisecond)
				}
				if acquired(rival) && !lost(rival) {
					t.Fatalf("a rival RedLock was granted while the holder holds (token %d)", rival.Token())
				}
				if !lost(rival) {
					t.Fatalf("a one-try RedLock is still pending %v after it started (bound %v; the holder's keys on %d nodes that are up)", w.Now().Sub(start), limit, refusals)
				}
				if !errors.Is(rival.Err(), holdfast.ErrNoQuorum) {
					t.Fatalf("one-try RedLock ended with %v, want ErrNoQuorum", rival.Err())
				}
			},
			"": held,
		})
		holder.Release(cancelled)
		start := w.Now()
		for !lost(holder) && w.Now().Sub(start) <= callTimeout+bound {
			w.Advance(time.Millisecond)
		}
		if !lost(holder) {
			rt.Fatalf("Release did not end the RedLock within %v", callTimeout+bound)
		}
		if !errors.Is(holder.Err(), holdfast.ErrReleased) {
			rt.Fatalf("the released RedLock ended with %v", holder.Err())
		}
	})
}
