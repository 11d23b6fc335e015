package deploytest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/actor"
	"github.com/holdfast/holdfast/internal/redissontest"
	"github.com/holdfast/holdfast/internal/topology"
	"github.com/holdfast/holdfast/scripts"
)

// TestClusterNamesOverAllSlots takes 200 names, spread over the slots of
// all three masters, releases them and leaves no lock key behind.
func TestClusterNamesOverAllSlots(t *testing.T) {
	c := topology.StartCluster(t, 3)
	hf := newClient(t, c.Client(t), holdfast.Config{})
	ctx := context.Background()
	locks := make([]*holdfast.Lock, 200)
	for i := range locks {
		locks[i] = hf.Lock(ctx, fmt.Sprintf("orders:%d", i))
	}
	for _, l := range locks {
		mustAcquire(t, l)
	}
	perNode := map[string]int{}
	for _, n := range c.Masters {
		keys, _ := n.MustDo("KEYS", "holdfast:*").AsStrSlice()
		for _, k := range keys {
			if !strings.HasSuffix(k, ":fence") && !strings.HasSuffix(k, ":w") {
				perNode[n.Addr]++
			}
		}
	}
	total := 0
	for _, n := range c.Masters {
		if perNode[n.Addr] == 0 {
			t.Fatalf("no lock key on %s: %v", n.Addr, perNode)
		}
		total += perNode[n.Addr]
	}
	if total != len(locks) {
		t.Fatalf("%d lock keys on the cluster, want %d", total, len(locks))
	}
	for _, l := range locks {
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release %s: %v", l.Name(), err)
		}
	}
	if keys := c.LockKeys(); len(keys) > 0 {
		t.Fatalf("left behind: %v", keys)
	}
}

// namesOnEachNode returns one lock name per master, each served by a
// different master.
func namesOnEachNode(t *testing.T, c *topology.Cluster, prefix string) []string {
	t.Helper()
	byNode := map[*topology.Node]string{}
	for i := 0; len(byNode) < len(c.Masters) && i < 1000; i++ {
		name := fmt.Sprintf("%s%d", prefix, i)
		n := c.Owner(actor.Slot(scripts.LockKey(name)))
		if _, ok := byNode[n]; !ok {
			byNode[n] = name
		}
	}
	if len(byNode) < len(c.Masters) {
		t.Fatalf("no name found for every master")
	}
	var out []string
	for _, name := range byNode {
		out = append(out, name)
	}
	return out
}

// TestClusterWakeUp: a waiter in another process is woken by the release of
// a name on each master. The holder's watchdog lease is 30s, so a waiter
// that only polled the holder's PTTL would sleep ~30s; it must be granted
// within 3s of the release.
func TestClusterWakeUp(t *testing.T) {
	c := topology.StartCluster(t, 3)
	holder := newClient(t, c.Client(t), holdfast.Config{})
	waiter := newClient(t, c.Client(t), holdfast.Config{})
	ctx := context.Background()
	names := namesOnEachNode(t, c, "wake:")
	holds := make([]*holdfast.Lock, len(names))
	waits := make([]*holdfast.Lock, len(names))
	for i, name := range names {
		holds[i] = holder.Lock(ctx, name)
		mustAcquire(t, holds[i])
		waits[i] = waiter.Lock(ctx, name)
		// The waiter tries, sees the holder and subscribes, with SSUBSCRIBE
		// on the name's master.
		owner := c.Owner(actor.Slot(scripts.LockKey(name)))
		topology.Eventually(t, waitFor, "SSUBSCRIBE on the name's master", func() bool {
			return shardNumsub(t, owner, scripts.Channel(name)) == 1
		})
		pending(t, waits[i])
	}
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, w := holds[i], waits[i]
			start := time.Now()
			if err := h.Release(ctx); err != nil {
				t.Errorf("release: %v", err)
				return
			}
			select {
			case <-w.Acquired:
				t.Logf("%s: woken %v after the release", name, time.Since(start).Round(time.Millisecond))
			case <-w.Lost:
				t.Errorf("%s: waiter lost: %v", name, w.Err())
			case <-time.After(3 * time.Second):
				t.Errorf("%s: waiter not woken within 3s of the release (PTTL polling would take ~30s)", name)
			}
			w.Release(ctx)
		}()
	}
	wg.Wait()
}

// TestClusterWatchdogHolds: 300 watchdog holds with a 1.5s lease, spread
// over the cluster, survive 4s — over two and a half lease lengths — through
// batched renewals, and their keys are still there. (A 1s lease left a
// loaded 2-core machine too little room: its renewals, due every 333ms,
// had about 600ms to land.)
func TestClusterWatchdogHolds(t *testing.T) {
	c := topology.StartCluster(t, 3)
	hf := newClient(t, c.Client(t), holdfast.Config{WatchdogTimeout: 1500 * time.Millisecond})
	ctx := context.Background()
	locks := make([]*holdfast.Lock, 300)
	for i := range locks {
		locks[i] = hf.Lock(ctx, fmt.Sprintf("hold:%d", i))
	}
	for _, l := range locks {
		mustAcquire(t, l)
	}
	time.Sleep(4 * time.Second)
	for _, l := range locks {
		notLost(t, l)
	}
	if keys := c.LockKeys(); len(keys) != len(locks) {
		t.Fatalf("%d lock keys after 4s, want %d", len(keys), len(locks))
	}
	for _, l := range locks {
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release %s: %v", l.Name(), err)
		}
	}
}

// TestClusterSlotMove moves the slot of held locks to another master. Two
// names share the slot (the hash tag ends at the first '}'): "mv}short" is
// held with a 1s watchdog lease, so it survives 3s only if its renewals
// follow the slot; "mv}long" is held with a 30s lease and has a waiter in
// another process, which must be woken by the release on the new master
// within 3s (polling the PTTL would take ~30s).
func TestClusterSlotMove(t *testing.T) {
	c := topology.StartCluster(t, 3)
	short := newClient(t, c.Client(t), holdfast.Config{WatchdogTimeout: time.Second})
	long := newClient(t, c.Client(t), holdfast.Config{})
	waiter := newClient(t, c.Client(t), holdfast.Config{})
	ctx := context.Background()

	slot := actor.Slot(scripts.LockKey("mv}short"))
	if s2 := actor.Slot(scripts.LockKey("mv}long")); s2 != slot {
		t.Fatalf("names in different slots: %d, %d", slot, s2)
	}
	hs := short.Lock(ctx, "mv}short")
	hl := long.Lock(ctx, "mv}long")
	mustAcquire(t, hs)
	mustAcquire(t, hl)
	w := waiter.Lock(ctx, "mv}long")
	from := c.Owner(slot)
	topology.Eventually(t, waitFor, "SSUBSCRIBE on the old master", func() bool {
		return shardNumsub(t, from, scripts.Channel("mv}long")) == 1
	})
	pending(t, w)

	to := c.Masters[0]
	if to == from {
		to = c.Masters[1]
	}
	c.MoveSlot(slot, to)
	if n, _ := from.MustDo("DBSIZE").AsInt64(); n != 0 {
		t.Fatalf("%d keys left on the old master", n)
	}

	// The old master dropped the subscription with the slot; the waiter's
	// process subscribes again on the new one.
	topology.Eventually(t, waitFor, "SSUBSCRIBE on the new master", func() bool {
		return shardNumsub(t, to, scripts.Channel("mv}long")) == 1
	})
	time.Sleep(3 * time.Second)
	notLost(t, hs)
	notLost(t, hl)
	pending(t, w)
	if ttl, _ := to.MustDo("PTTL", scripts.LockKey("mv}short")).AsInt64(); ttl <= 0 {
		t.Fatalf("short hold's key on the new master has PTTL %d", ttl)
	}

	start := time.Now()
	if err := hl.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	select {
	case <-w.Acquired:
		t.Logf("woken %v after the release on the new master", time.Since(start).Round(time.Millisecond))
	case <-w.Lost:
		t.Fatalf("waiter lost: %v", w.Err())
	case <-time.After(3 * time.Second):
		t.Fatalf("waiter not woken within 3s of the release on the new master")
	}
	for _, l := range []*holdfast.Lock{w, hs} {
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release %s: %v", l.Name(), err)
		}
	}
}

// shardNumsub is PUBSUB SHARDNUMSUB of channel on node n.
func shardNumsub(t testing.TB, n *topology.Node, channel string) int64 {
	t.Helper()
	arr, err := n.MustDo("PUBSUB", "SHARDNUMSUB", channel).ToArray()
	if err != nil || len(arr) != 2 {
		t.Fatalf("PUBSUB SHARDNUMSUB: %v %v", arr, err)
	}
	v, _ := arr[1].AsInt64()
	return v
}

// TestClusterFailover: on a cluster of 3 masters with a replica each, the
// master of a held name is SIGKILLed right after a grant with SyncReplicas
// 1. The cluster promotes its replica: the name is still held there, the
// holder is not Lost and renews on the new master, another Client cannot
// take it, and a waiter — whose SSUBSCRIBE connection to the dead master
// broke — subscribes on the new master and is woken by the release.
func TestClusterFailover(t *testing.T) {
	c := topology.StartClusterWithReplicas(t, 3, 1)
	const lease = 15 * time.Second
	holder := newClient(t, c.Client(t), holdfast.Config{SyncReplicas: 1, WatchdogTimeout: lease})
	waiter := newClient(t, c.Client(t), holdfast.Config{})
	ctx := context.Background()

	const name = "failover"
	slot := actor.Slot(scripts.LockKey(name))
	old := c.Owner(slot)
	h := holder.Lock(ctx, name)
	mustAcquire(t, h)
	w := waiter.Lock(ctx, name)
	topology.Eventually(t, waitFor, "SSUBSCRIBE on the name's master", func() bool {
		return shardNumsub(t, old, scripts.Channel(name)) == 1
	})
	old.Kill()
	start := time.Now()

	var promoted *topology.Node
	topology.Eventually(t, 30*time.Second, "a replica promoted for the slot", func() bool {
		for _, n := range c.Replicas {
			if n.Info("replication", "role") == "master" {
				if c.Serving(slot) == n {
					promoted = n
					return true
				}
			}
		}
		return false
	})
	t.Logf("failover took %v", time.Since(start).Round(time.Millisecond))
	v, err := promoted.MustDo("GET", scripts.LockKey(name)).ToString()
	if _, ok := scripts.ParseHold(v); err != nil || !ok {
		t.Fatalf("new master's lock key: %q, %v; want the holder's hold", v, err)
	}
	topology.Eventually(t, lease, "a renewal on the new master", func() bool {
		ttl, _ := promoted.MustDo("PTTL", scripts.LockKey(name)).AsInt64()
		return time.Duration(ttl)*time.Millisecond > lease-time.Since(start)+time.Second
	})
	notLost(t, h)
	topology.Eventually(t, waitFor, "the waiter's SSUBSCRIBE on the new master", func() bool {
		return shardNumsub(t, promoted, scripts.Channel(name)) == 1
	})

	holdsThenWakes(t, newClient(t, c.Client(t), holdfast.Config{}), name, h, w, "new master")
}

// TestClusterEveryKind: each lock kind (reentrant, fair, read-write) grants
// on the cluster, on names over all masters, and a waiter of another
// process is woken through sharded pub/sub when the holder releases.
func TestClusterEveryKind(t *testing.T) {
	c := topology.StartCluster(t, 3)
	a := newClient(t, c.Client(t), holdfast.Config{})
	b := newClient(t, c.Client(t), holdfast.Config{})
	ctx := context.Background()
	kinds := map[string]func(cl *holdfast.Client, name string) *holdfast.Lock{
		"lock": func(cl *holdfast.Client, name string) *holdfast.Lock { return cl.Lock(ctx, name) },
		"fair": func(cl *holdfast.Client, name string) *holdfast.Lock { return cl.FairLock(ctx, name) },
		"rw":   func(cl *holdfast.Client, name string) *holdfast.Lock { return cl.WriteLock(ctx, name) },
		"semaphore": func(cl *holdfast.Client, name string) *holdfast.Lock {
			return cl.Semaphore(ctx, name, 1)
		},
	}
	for kind, lock := range kinds {
		for _, name := range namesOnEachNode(t, c, kind+":") {
			h := lock(a, name)
			mustAcquire(t, h)
			w := lock(b, name)
			time.Sleep(100 * time.Millisecond)
			pending(t, w)
			start := time.Now()
			if err := h.Release(ctx); err != nil {
				t.Fatalf("%s %s: release: %v", kind, name, err)
			}
			select {
			case <-w.Acquired:
				t.Logf("%s %s: woken %v after the release", kind, name, time.Since(start).Round(time.Millisecond))
			case <-w.Lost:
				t.Fatalf("%s %s: waiter lost: %v", kind, name, w.Err())
			case <-time.After(3 * time.Second):
				t.Fatalf("%s %s: waiter not woken within 3s of the release", kind, name)
			}
			if err := w.Release(ctx); err != nil {
				t.Fatalf("%s %s: waiter release: %v", kind, name, err)
			}
		}
	}
}

// TestClusterRedissonLayout: under LayoutRedisson on a cluster, a Go Client
// and a Redisson protocol client (sharded pub/sub, as Redisson uses on a
// cluster) exclude and wake each other on names of every master.
func TestClusterRedissonLayout(t *testing.T) {
	c := topology.StartCluster(t, 3)
	hf := newClient(t, c.Client(t), holdfast.Config{Layout: holdfast.LayoutRedisson})
	java := redissontest.New(c.Client(t), "java-cluster", redissontest.WithShardedPubSub())
	defer java.Close()
	ctx := context.Background()
	for _, name := range namesOnEachNode(t, c, "redisson:") {
		if err := java.Lock(ctx, name, 1, -1); err != nil {
			t.Fatal(err)
		}
		g := hf.Lock(ctx, name)
		time.Sleep(100 * time.Millisecond)
		pending(t, g)
		start := time.Now()
		if err := java.Unlock(ctx, name, 1); err != nil {
			t.Fatal(err)
		}
		select {
		case <-g.Acquired:
			t.Logf("%s: Go woken %v after the Java unlock", name, time.Since(start).Round(time.Millisecond))
		case <-g.Lost:
			t.Fatalf("%s: lost: %v", name, g.Err())
		case <-time.After(3 * time.Second):
			t.Fatalf("%s: Go waiter not woken within 3s of the Java unlock", name)
		}
		done := make(chan error, 1)
		go func() { done <- java.Lock(ctx, name, 2, -1) }()
		time.Sleep(100 * time.Millisecond)
		start = time.Now()
		if err := g.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: Java woken %v after the Go release", name, time.Since(start).Round(time.Millisecond))
		case <-time.After(3 * time.Second):
			t.Fatalf("%s: Java waiter not woken within 3s of the Go release", name)
		}
		java.Unlock(ctx, name, 2)
	}
}
