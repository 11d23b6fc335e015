package sim_test

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

// panicOf runs f and returns what it panicked with ("" if it returned).
func panicOf(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

func TestChaosWithoutClientsPanics(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w := sim.New(sim.Config{Seed: 1, Replicas: 1})
		if msg := panicOf(func() { w.Chaos(rt) }); !strings.Contains(msg, "no clients") {
			rt.Fatalf("Chaos with no clients: panic %q", msg)
		}
		if w.Now() != sim.Start || w.Generation() != 0 || len(w.Disruptions()) != 0 {
			rt.Fatalf("the refused Chaos changed the World: now %v, generation %d", w.Now(), w.Generation())
		}
	})
}

func TestChaosAndSettleOnAClosedWorldPanic(t *testing.T) {
	w := sim.New(sim.Config{Seed: 1})
	c := w.NewClient(sim.ClientConfig{})
	l := c.Lock(context.Background(), "x")
	if err := l.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !lost(l) {
		t.Fatal("Close left the Lock held")
	}
	now := w.Now()
	if msg := panicOf(w.Settle); !strings.Contains(msg, "closed World") {
		t.Fatalf("Settle on a closed World: panic %q", msg)
	}
	rapid.Check(t, func(rt *rapid.T) {
		if msg := panicOf(func() { w.Chaos(rt) }); !strings.Contains(msg, "closed World") {
			rt.Fatalf("Chaos on a closed World: panic %q", msg)
		}
	})
	if w.Now() != now {
		t.Fatalf("refused calls moved time from %v to %v", now, w.Now())
	}
}

// Every fault of the menu is drawn within a hundred short runs, time never
// runs backwards across the steps, and Settle leaves no Lock waiting.
func TestChaosDrawsEveryFaultAndSettleEndsThem(t *testing.T) {
	seen := map[string]bool{}
	rapid.Check(t, func(rt *rapid.T) {
		w := sim.New(sim.Config{Seed: rapid.Int64().Draw(rt, "seed"), Replicas: 1})
		a, b := w.NewClient(sim.ClientConfig{}), w.NewClient(sim.ClientConfig{})
		locks := []*holdfast.Lock{ // each waits for the other's hold at most 20s
			a.Lock(context.Background(), "x", holdfast.WithWait(20*time.Second)),
			b.Lock(context.Background(), "x", holdfast.WithWait(20*time.Second)),
		}
		for i := 0; i < 12; i++ {
			before := w.Now()
			desc := w.Chaos(rt)
			if desc == "" || w.Now().Before(before) {
				rt.Fatalf("step %q moved time from %v to %v", desc, before, w.Now())
			}
			seen[strings.Fields(desc)[0]] = true
		}
		w.Settle()
		for i, l := range locks {
			if !acquired(l) && !lost(l) {
				rt.Fatalf("Lock %d still waits after Settle", i)
			}
		}
		if err := w.Close(); err != nil {
			rt.Fatal(err)
		}
	})
	for _, step := range []string{"advance", "steal", "pause", "resume", "partition", "heal", "lose", "failover", "restart"} {
		if !seen[step] {
			t.Errorf("no run drew %q (drawn: %v)", step, seen)
		}
	}
}

// Settle resumes a paused holder, whose lease has run out, so the waiter
// behind it gets the lock; and it returns, after SettleLimit, when a Lock
// waits behind a hold the test keeps.
func TestSettle(t *testing.T) {
	w := sim.New(sim.Config{Seed: 3})
	a, b := w.NewClient(sim.ClientConfig{}), w.NewClient(sim.ClientConfig{})
	la := a.Lock(context.Background(), "x")
	if err := la.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.Pause(a)
	lb := b.Lock(context.Background(), "x", holdfast.WithWait(time.Minute))
	w.Partition(b)
	w.Advance(10 * time.Second)
	w.Settle()
	if !lost(la) || !acquired(lb) || lost(lb) {
		t.Fatalf("after Settle: a lost=%v (%v), b acquired=%v lost=%v (%v)", lost(la), la.Err(), acquired(lb), lost(lb), lb.Err())
	}
	lc := a.Lock(context.Background(), "x") // waits for b, which never releases
	start := w.Now()
	w.Settle()
	if acquired(lc) || lost(lc) || w.Now().Sub(start) < sim.SettleLimit {
		t.Fatalf("Settle behind a kept hold: returned after %v, c acquired=%v lost=%v", w.Now().Sub(start), acquired(lc), lost(lc))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
