package holdfast_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/sim"
)

// TestSharedClientIDProperties: Clients that share one ClientID — an easy
// setting to choose, e.g. the host name — still exclude each other, since
// every Client's owner fields carry its own instance part. rapid draws locks
// (with and without a shared WithOwner id), releases, pauses and time; after
// every action no two owner fields validly hold one name at once.
func TestSharedClientIDProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w := sim.New(sim.Config{Seed: rapid.Int64().Draw(rt, "seed")})
		var clients []*holdfast.Client
		type lockOf struct {
			l      *holdfast.Lock
			client int
		}
		var locks []lockOf
		paused := map[int]bool{}
		for i := 0; i < 3; i++ {
			clients = append(clients, w.NewClient(sim.ClientConfig{ID: "dup",
				WatchdogTimeout: time.Duration(rapid.IntRange(300, 3000).Draw(rt, "watchdogMs")) * time.Millisecond}))
		}
		rt.Repeat(map[string]func(*rapid.T){
			"lock": func(t *rapid.T) {
				ctx := context.Background()
				if rapid.Bool().Draw(t, "sharedOwner") {
					ctx = holdfast.WithOwner(ctx, "worker") // the same owner id in every Client
				}
				var opts []holdfast.Option
				if rapid.Bool().Draw(t, "tryOnce") {
					opts = append(opts, holdfast.WithWait(0))
				}
				i := rapid.IntRange(0, len(clients)-1).Draw(t, "client")
				l := clients[i].Lock(ctx, rapid.SampledFrom([]string{"a", "b"}).Draw(t, "name"), opts...)
				locks = append(locks, lockOf{l, i})
			},
			"release": func(t *rapid.T) {
				var live []*holdfast.Lock
				for _, l := range locks {
					if !isClosed(l.l.Lost) && !paused[l.client] { // a paused Client's Release would block
						live = append(live, l.l)
					}
				}
				if len(live) == 0 {
					t.Skip("no live lock")
				}
				rapid.SampledFrom(live).Draw(t, "lock").Release(context.Background())
			},
			"advance": func(t *rapid.T) {
				w.Advance(time.Duration(rapid.IntRange(1, 2000).Draw(t, "ms")) * time.Millisecond)
			},
			"pause": func(t *rapid.T) {
				i := rapid.IntRange(0, len(clients)-1).Draw(t, "client")
				if paused[i] {
					w.Resume(clients[i])
				} else {
					w.Pause(clients[i])
				}
				paused[i] = !paused[i]
			},
			"": func(t *rapid.T) { checkFieldExclusion(t, w) },
		})
		for i, c := range clients {
			if paused[i] {
				w.Resume(c)
			}
		}
		w.Advance(10 * time.Second)
		checkFieldExclusion(rt, w)
		for _, c := range clients {
			c.Close()
		}
	})
}

// checkFieldExclusion fails when two different owner fields validly held
// one name at the same instant. Holds are told apart by their field, which
// names the Client (whatever its ClientID), and the Lock call.
func checkFieldExclusion(t *rapid.T, w *sim.World) {
	type span struct {
		field, name string
		from, to    time.Time
	}
	open := map[string]*span{}
	var spans []*span
	for _, e := range w.History() {
		k := fmt.Sprintf("%s/%d", e.Field, e.Req)
		switch e.Kind {
		case sim.Acquired:
			s := &span{field: e.Field, name: e.Name, from: e.At, to: e.DeadlineAt}
			open[k] = s
			spans = append(spans, s)
		case sim.Renewed:
			if s := open[k]; s != nil && e.DeadlineAt.After(s.to) {
				s.to = e.DeadlineAt
			}
		case sim.Releasing, sim.Lost:
			if s := open[k]; s != nil {
				if e.At.Before(s.to) {
					s.to = e.At
				}
				delete(open, k)
			}
		}
	}
	for _, s := range open {
		if w.Now().Before(s.to) {
			s.to = w.Now()
		}
	}
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.name == b.name && a.field != b.field && b.from.Before(a.to) && a.from.Before(b.to) {
				t.Fatalf("exclusion: %s held %q [%v, %v] while %s held it [%v, %v]", a.field, a.name,
					a.from.Sub(sim.Start), a.to.Sub(sim.Start), b.field, b.from.Sub(sim.Start), b.to.Sub(sim.Start))
			}
		}
	}
}
