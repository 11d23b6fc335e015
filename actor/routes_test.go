package actor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/internal/topology"
	"github.com/holdfast/holdfast/pubsub"
	"github.com/holdfast/holdfast/scripts"
)

// TestPickPrefersNodesThatAnswered: the slot map is read from the node
// that answered last, else a master of the last map, else a node nothing
// was heard of, else the node whose failure is the oldest.
func TestPickPrefersNodesThatAnswered(t *testing.T) {
	const m1, m2, r1, r2 = "10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1", "10.0.0.4:1"
	type event struct {
		addr string
		ok   bool
	}
	for _, tc := range []struct {
		name   string
		events []event
		want   string
	}{
		{"nothing heard: a master", nil, m1},
		{"the last to answer", []event{{m1, true}, {m2, true}}, m2},
		{"answered, then failed: the other master", []event{{m1, true}, {m1, false}}, m2},
		{"every master failed: a node not heard of", []event{{m1, false}, {m2, false}}, r1},
		{"every node failed: the oldest failure", []event{{r2, false}, {m1, false}, {r1, false}, {m2, false}}, r2},
		{"failed, then answered again", []event{{m1, false}, {m2, true}, {m1, true}}, m1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n nodeRoutes
			var slots pubsub.SlotMap
			for s := range slots {
				slots[s] = m1
				if s%2 == 1 {
					slots[s] = m2
				}
			}
			n.cur.Store(newSlotRoutes(&slots))
			for _, e := range tc.events {
				n.heard(e.addr, e.ok)
			}
			nodes := map[string]rueidis.Client{m1: nil, m2: nil, r1: nil, r2: nil}
			if got, _ := n.pick(nodes); got != tc.want {
				t.Fatalf("picked %s, want %s", got, tc.want)
			}
		})
	}
}

// TestRenewalsDoNotWaitForASlotMapRead: on a real cluster, a slot map read
// that lands on a frozen replica (every master having failed last) holds
// back no renewal: RenewMulti, with a stale map that places a key on a
// master that does not serve it, renews every key — that one again by its
// slot, on its own master — while the read is still out; a second read
// asked for meanwhile returns at once; once the replica answers, the map
// is right again.
func TestRenewalsDoNotWaitForASlotMapRead(t *testing.T) {
	c := topology.StartClusterWithReplicas(t, 3, 1)
	var keys []string
	for i := range 30 {
		key := scripts.LockKey(fmt.Sprintf("routes:%d", i))
		c.Owner(Slot(key)).MustDo("SET", key, scripts.Hold{Field: "f", Count: 1, Token: 1}.String(), "PX", "60000")
		keys = append(keys, key)
	}
	// A master lists a replica in CLUSTER SLOTS, and so a client knows it
	// among its nodes, once it heard of the replica's offset, which the
	// writes above moved.
	topology.Eventually(t, 30*time.Second, "replicas listed in CLUSTER SLOTS", func() bool {
		for _, m := range c.Masters {
			slots, _ := m.MustDo("CLUSTER", "SLOTS").ToArray()
			for _, rng := range slots {
				if nodes, _ := rng.ToArray(); len(nodes) < 4 {
					return false
				}
			}
		}
		return true
	})
	r := NewRueidis(c.Client(t))
	if n := len(r.client.Nodes()); n != len(c.Nodes) {
		t.Fatalf("the client knows %d nodes, want %d", n, len(c.Nodes))
	}
	ctx := context.Background()
	r.PrepareRenewals(ctx)
	if r.routes.routes() == nil || r.routes.needsRead() {
		t.Fatal("no slot map after PrepareRenewals")
	}
	stray := keys[0]
	owner := c.Owner(Slot(stray))
	wrong := c.Masters[0]
	if wrong == owner {
		wrong = c.Masters[1]
	}
	slots := *r.routes.routes().addr
	slots[Slot(stray)] = wrong.Addr
	r.routes.cur.Store(newSlotRoutes(&slots))
	r.routes.stale.Store(true)

	for _, n := range c.Replicas {
		t.Cleanup(n.Continue)
		n.Stop()
	}
	for _, m := range c.Masters {
		r.routes.heard(m.Addr, false)
	}
	readCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	read := make(chan struct{})
	go func() {
		defer close(read)
		r.PrepareRenewals(readCtx)
	}()
	topology.Eventually(t, 10*time.Second, "the slot map read out", func() bool { return !r.routes.stale.Load() })
	second := make(chan struct{})
	go func() {
		defer close(second)
		r.PrepareRenewals(readCtx)
	}()
	select {
	case <-second:
	case <-time.After(30 * time.Second):
		t.Fatal("a second read waited for the one out")
	}

	group := r.Group()
	byGroup := map[uint16]*scripts.Call{}
	var calls []scripts.Call
	var order []uint16
	for _, k := range keys {
		g := group(k)
		if byGroup[g] == nil {
			byGroup[g] = &scripts.Call{Script: scripts.RenewScript}
			order = append(order, g)
		}
		byGroup[g].Keys = append(byGroup[g].Keys, k)
		byGroup[g].Args = append(byGroup[g].Args, "f", "600000")
	}
	for _, g := range order {
		calls = append(calls, *byGroup[g])
	}
	if len(calls) != len(c.Masters) {
		t.Fatalf("%d calls for %d masters", len(calls), len(c.Masters))
	}
	out, errs := r.RenewMulti(ctx, calls)
	select {
	case <-read:
		t.Fatal("the read on a frozen replica answered: nothing was held out")
	default:
	}
	for i := range calls {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		for k, ok := range out[i] {
			if !ok {
				t.Fatalf("%s not renewed", calls[i].Keys[k])
			}
		}
	}
	if ttl, _ := owner.MustDo("PTTL", stray).AsInt64(); ttl <= 60_000 {
		t.Fatalf("%s, placed on the wrong master: PTTL %dms on its own, not renewed there", stray, ttl)
	}
	if !r.routes.stale.Load() {
		t.Fatal("a key placed on the wrong master did not mark the map stale")
	}

	for _, n := range c.Replicas {
		n.Continue()
	}
	select {
	case <-read:
	case <-time.After(time.Minute):
		t.Fatal("the read did not end once the replica was thawed")
	}
	r.PrepareRenewals(ctx) // the renewal marked the map stale meanwhile
	if got := r.routes.routes().addr[Slot(stray)]; got != owner.Addr {
		t.Fatalf("slot map gives %s for the stray key, want %s", got, owner.Addr)
	}
}
