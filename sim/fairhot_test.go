package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/sim"
)

// TestFairLockHotLoop: clients loop FairLock → Release on one name; the
// lock changes hands steadily, with no gap longer than a few round trips.
func TestFairLockHotLoop(t *testing.T) {
	w := sim.New(sim.Config{Seed: 9})
	var clients []*holdfast.Client
	for i := 0; i < 3; i++ {
		clients = append(clients, w.NewClient(sim.ClientConfig{}))
	}
	ctx := context.Background()
	type slot struct {
		c *holdfast.Client
		l *holdfast.Lock
	}
	var slots []*slot
	for _, c := range clients {
		for g := 0; g < 4; g++ {
			slots = append(slots, &slot{c: c, l: c.FairLock(ctx, "hot")})
		}
	}
	handoffs := 0
	last := w.Now()
	var worst time.Duration
	for w.Now().Sub(sim.Start) < 2*time.Second {
		w.Advance(time.Millisecond)
		for _, s := range slots {
			if acquired(s.l) {
				s.l.Release(ctx)
				s.l = s.c.FairLock(ctx, "hot")
				handoffs++
				worst = max(worst, w.Now().Sub(last))
				last = w.Now()
			}
			if lost(s.l) && !acquired(s.l) {
				t.Fatalf("lost: %v", s.l.Err())
			}
		}
	}
	t.Logf("%d handoffs in 2s of virtual time, longest gap %v", handoffs, worst)
	if worst > 100*time.Millisecond {
		t.Fatalf("the lock stood still for %v", worst)
	}
}
