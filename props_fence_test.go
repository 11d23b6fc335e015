package holdfast_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/sim"
)

// TestFenceSlotCounterProperties: tokens come from one counter per hash
// slot, and still increase strictly per name — across names that share a
// slot (the "o}" names share the tag "o"; "o}fair" is a fair lock, whose
// scripts take tokens through the same fence.lua), and across restarts of
// the primary with persistence.
func TestFenceSlotCounterProperties(t *testing.T) {
	names := []string{"o}1", "o}2", "o}fair", "solo"}
	rapid.Check(t, func(rt *rapid.T) {
		w := sim.New(sim.Config{Seed: rapid.Int64().Draw(rt, "seed")})
		var clients []*holdfast.Client
		for i := 0; i < 2; i++ {
			clients = append(clients, w.NewClient(sim.ClientConfig{WatchdogTimeout: time.Second}))
		}
		var locks []*holdfast.Lock
		rt.Repeat(map[string]func(*rapid.T){
			"lock": func(t *rapid.T) {
				c := clients[rapid.IntRange(0, len(clients)-1).Draw(t, "client")]
				name := rapid.SampledFrom(names).Draw(t, "name")
				lock := c.Lock
				if name == "o}fair" {
					lock = c.FairLock
				}
				locks = append(locks, lock(context.Background(), name))
			},
			"release": func(t *rapid.T) {
				var live []*holdfast.Lock
				for _, l := range locks {
					if isClosed(l.Acquired) && !isClosed(l.Lost) {
						live = append(live, l)
					}
				}
				if len(live) == 0 {
					t.Skip("nothing held")
				}
				rapid.SampledFrom(live).Draw(t, "lock").Release(context.Background())
			},
			"advance": func(t *rapid.T) {
				w.Advance(time.Duration(rapid.IntRange(1, 1500).Draw(t, "ms")) * time.Millisecond)
			},
			"restart": func(*rapid.T) { w.RestartPrimaryPersisted() },
			"steal":   func(t *rapid.T) { w.Steal(rapid.SampledFrom(names).Draw(t, "name")) },
			"":        func(t *rapid.T) { checkTokensPerName(t, w) },
		})
		for _, c := range clients {
			c.Close()
		}
		checkTokensPerName(rt, w)
	})
}

// checkTokensPerName fails unless, in the order the grants ran in Redis,
// each fresh grant of a name got a token above every earlier grant of that
// name.
func checkTokensPerName(t *rapid.T, w *sim.World) {
	var grants []sim.Event
	for _, e := range w.History() {
		if e.Kind == sim.Acquired {
			grants = append(grants, e)
		}
	}
	sort.SliceStable(grants, func(i, j int) bool { return grants[i].GrantedAt.Before(grants[j].GrantedAt) })
	last := map[string]sim.Event{}
	for _, g := range grants {
		if prev, ok := last[g.Name]; ok && prev.Field != g.Field && g.Token <= prev.Token {
			t.Fatalf("%s got token %d on %q after %s had %d", g.Field, g.Token, g.Name, prev.Field, prev.Token)
		}
		last[g.Name] = g
	}
}
