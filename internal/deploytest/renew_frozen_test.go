package deploytest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/actor"
	"github.com/holdfast/holdfast/internal/topology"
	"github.com/holdfast/holdfast/scripts"
)

// TestClusterRenewalsBesideFrozenReplicas: renewals never wait on a read
// of the slot map. On a cluster of 3 masters with a replica each, 10,000
// Locks are held with a 3s watchdog (renewed every 1s); then every replica
// is frozen (SIGSTOP: its sockets stay open and it answers nothing, so a
// keyless CLUSTER SHARDS that lands on one never answers), and a slot
// holding 8 of the held names moves from master to master every 400ms, so
// that the renewals keep finding the slot map stale. For 15s, five
// leases, not one hold may be lost, and each moving name's key must still
// be on the master that serves its slot, with a lease renewed within the
// last lease.
//
// A round that waited for the read (up to CallTimeout, 5s by default)
// before sending would leave every hold on every healthy master without a
// renewal for longer than the 2s a 3s lease leaves after its last
// renewal.
func TestClusterRenewalsBesideFrozenReplicas(t *testing.T) {
	const (
		held   = 10_000
		chunk  = 500
		moving = 8
		lease  = 3 * time.Second
		every  = 400 * time.Millisecond
		window = 15 * time.Second
	)
	c := topology.StartClusterWithReplicas(t, 3, 1)
	hf := newClient(t, c.Client(t), holdfast.Config{WatchdogTimeout: lease})
	ctx := context.Background()

	names := make([]string, held)
	for i := range names {
		names[i] = fmt.Sprintf("frozen:%d", i)
		if i < moving {
			names[i] = fmt.Sprintf("mv}%d", i) // one slot: the tag ends at the first '}'
		}
	}
	// Acquired a chunk at a time: the holds renew in rounds spread over
	// the watchdog's period, rather than all ten thousand at one instant
	// (a burst that a loaded machine may not serve within a lease).
	locks := make([]*holdfast.Lock, held)
	start := time.Now()
	for from := 0; from < held; from += chunk {
		for i := from; i < min(from+chunk, held); i++ {
			locks[i] = hf.Lock(ctx, names[i])
		}
		for _, l := range locks[from:min(from+chunk, held)] {
			mustAcquire(t, l)
		}
	}
	t.Logf("%d holds acquired in %v", held, time.Since(start).Round(time.Millisecond))

	// Read before the freeze: Cluster.Owner and BeginMove ask every node,
	// frozen replicas among them.
	slot := actor.Slot(scripts.LockKey(names[0]))
	mv := &slotMover{slot: fmt.Sprint(slot), owner: c.Owner(slot), masters: c.Masters, ids: map[*topology.Node]string{}}
	for _, n := range c.Masters {
		mv.ids[n] = n.ID()
	}
	for _, r := range c.Replicas {
		t.Cleanup(r.Continue) // before the nodes are killed
		r.Stop()
	}

	start = time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var moveErr error
	moves := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if moveErr = mv.next(); moveErr != nil {
				return
			}
			moves++
		}
	}()
	time.Sleep(window)
	close(stop)
	wg.Wait()
	t.Logf("%d slot moves in %v", moves, time.Since(start).Round(time.Millisecond))
	if moveErr != nil {
		t.Fatalf("moving slot %s: %v", mv.slot, moveErr)
	}
	// A move every 1.5s at the least (one every 400ms when the machine
	// keeps up) keeps the renewals finding the map stale.
	if minMoves := int(window / (1500 * time.Millisecond)); moves < minMoves {
		t.Fatalf("%d slot moves in %v, want at least %d", moves, window, minMoves)
	}

	lost := 0
	for i, l := range locks {
		select {
		case <-l.Lost:
			if lost++; lost <= 5 {
				t.Errorf("%s lost: %v", names[i], l.Err())
			}
		default:
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d holds lost beside frozen replicas and a moving slot", lost, held)
	}
	for _, name := range names[:moving] {
		key := scripts.LockKey(name)
		ttl, err := mv.owner.Do("PTTL", key)
		ms, _ := ttl.AsInt64()
		if err != nil || ms <= 0 || time.Duration(ms)*time.Millisecond > lease {
			t.Errorf("%s on %s, which serves its slot: PTTL %dms (%v), want in (0, %v]", name, mv.owner.Addr, ms, err, lease)
		}
	}
}

// slotMover moves one slot, with its keys, from master to master the way
// Cluster.MoveSlot does, but asks only the masters: it knows the owner.
type slotMover struct {
	slot    string
	owner   *topology.Node
	masters []*topology.Node
	ids     map[*topology.Node]string
}

// next moves the slot to the master after its owner.
func (m *slotMover) next() error {
	from := m.owner
	var to *topology.Node
	for i, n := range m.masters {
		if n == from {
			to = m.masters[(i+1)%len(m.masters)]
		}
	}
	do := func(n *topology.Node, args ...string) error {
		if _, err := n.Do(args...); err != nil {
			return fmt.Errorf("%s %v: %w", n.Addr, args, err)
		}
		return nil
	}
	if err := do(to, "CLUSTER", "SETSLOT", m.slot, "IMPORTING", m.ids[from]); err != nil {
		return err
	}
	if err := do(from, "CLUSTER", "SETSLOT", m.slot, "MIGRATING", m.ids[to]); err != nil {
		return err
	}
	msg, err := from.Do("CLUSTER", "GETKEYSINSLOT", m.slot, "100")
	if err != nil {
		return err
	}
	keys, _ := msg.AsStrSlice()
	if len(keys) > 0 {
		if err := do(from, append([]string{"MIGRATE", "127.0.0.1", to.Port, "", "0", "5000", "KEYS"}, keys...)...); err != nil {
			return err
		}
	}
	// The target first, so it serves the slot before the source redirects.
	order := []*topology.Node{to, from}
	for _, n := range m.masters {
		if n != to && n != from {
			order = append(order, n)
		}
	}
	for _, n := range order {
		if err := do(n, "CLUSTER", "SETSLOT", m.slot, "NODE", m.ids[to]); err != nil {
			return err
		}
	}
	m.owner = to
	return nil
}
