package deploytest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/topology"
	"github.com/holdfast/holdfast/scripts"
)

// TestSentinelHoldSurvivesFailover: with SyncReplicas 1 the primary is
// SIGKILLed right after a grant. After the Sentinels promote the replica the
// name is still held there (another Client cannot take it), the holder is
// not Lost and renews on the new primary, and a waiter of another process,
// resubscribed on the new primary, is woken by the release — well before
// the 15s lease it would otherwise sleep out.
func TestSentinelHoldSurvivesFailover(t *testing.T) {
	s := topology.StartSentinel(t)
	const lease = 15 * time.Second
	holder := newClient(t, s.Client(t), holdfast.Config{SyncReplicas: 1, WatchdogTimeout: lease})
	waiter := newClient(t, s.Client(t), holdfast.Config{})
	ctx := context.Background()

	h := holder.Lock(ctx, "job")
	mustAcquire(t, h)
	s.Primary.Kill()
	w := waiter.Lock(ctx, "job")

	start := time.Now()
	s.WaitFailover(30 * time.Second)
	t.Logf("failover took %v", time.Since(start).Round(time.Millisecond))
	v, err := s.Replica.MustDo("GET", scripts.LockKey("job")).ToString()
	hold, ok := scripts.ParseHold(v)
	if err != nil || !ok {
		t.Fatalf("new primary's lock key: %q, %v; want the holder's hold", v, err)
	}
	if !strings.HasPrefix(hold.Field, holder.ClientID()+":") {
		t.Fatalf("new primary shows %q holding, want the holder %s", hold.Field, holder.ClientID())
	}

	// A renewal reaches the new primary: its TTL rises back above what is
	// left of the first grant's lease.
	topology.Eventually(t, lease, "a renewal on the new primary", func() bool {
		ttl, _ := s.Replica.MustDo("PTTL", scripts.LockKey("job")).AsInt64()
		return time.Duration(ttl)*time.Millisecond > lease-time.Since(start)+time.Second
	})
	notLost(t, h)

	holdsThenWakes(t, newClient(t, s.Client(t), holdfast.Config{}), "job", h, w, "new primary")
}

// TestSentinelSyncWithoutAck: with the replica frozen (SIGSTOP) and
// SyncReplicas 1, no Lock reports Acquired: it ends with ErrReplicaSync and
// the grant is undone on the primary. A hold taken before the freeze keeps
// renewing on the primary but none of its renewals syncs, so it is Lost at
// its deadline. Once the replica runs again, Locks are granted, and their
// release runs without WAIT.
func TestSentinelSyncWithoutAck(t *testing.T) {
	s := topology.StartSentinel(t)
	hf := newClient(t, s.Client(t), holdfast.Config{
		SyncReplicas: 1, SyncTimeout: 200 * time.Millisecond, WatchdogTimeout: time.Second,
	})
	ctx := context.Background()
	held := hf.Lock(ctx, "held")
	mustAcquire(t, held)

	s.Replica.Stop()
	defer s.Replica.Continue()
	l := hf.Lock(ctx, "unsynced")
	mustLose(t, l, holdfast.ErrReplicaSync)
	select {
	case <-l.Acquired:
		t.Fatalf("Acquired closed without the replica's ack")
	default:
	}
	// The undo runs as soon as the Lock has ended.
	topology.Eventually(t, 5*time.Second, "the unsynced grant undone on the primary", func() bool {
		n, _ := s.Primary.MustDo("EXISTS", scripts.LockKey("unsynced")).AsInt64()
		return n == 0
	})
	deadline := held.Deadline()
	mustLose(t, held, holdfast.ErrLeaseExpired)
	if late := time.Since(deadline); late > 200*time.Millisecond {
		t.Fatalf("hold lost %v after its deadline", late)
	}

	s.Replica.Continue()
	topology.Eventually(t, 10*time.Second, "replica back in sync", func() bool {
		return s.Replica.Info("replication", "master_link_status") == "up"
	})
	again := hf.Lock(ctx, "unsynced", holdfast.WithLease(30*time.Second)) // no renewal WAITs
	mustAcquire(t, again)
	// A release does not wait for replicas: it runs without WAIT.
	waits := func() string { return s.Primary.Info("commandstats", "cmdstat_wait") }
	before := waits()
	if err := again.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if after := waits(); after != before {
		t.Fatalf("the release ran WAIT: cmdstat_wait %q, then %q", before, after)
	}
}

// TestSentinelWindowWithoutSync shows what SyncReplicas closes. Without it
// a grant is acknowledged before it reaches the replica; here the replica
// is frozen behind 32MB of replication backlog when the primary grants and
// dies, so the promoted replica never saw the grant. Another Client then
// takes the name while the first still believes it holds it — the window —
// and the first is told through Lost: ErrNotOwner when its next renewal
// reaches the new primary, ErrLeaseExpired when its client is still
// finding the new primary at the deadline (on a loaded machine).
func TestSentinelWindowWithoutSync(t *testing.T) {
	s := topology.StartSentinel(t)
	first := newClient(t, s.Client(t), holdfast.Config{WatchdogTimeout: 3 * time.Second})
	second := newClient(t, s.Client(t), holdfast.Config{})
	ctx := context.Background()

	s.Replica.Stop()
	// The backlog fills the socket buffers, so the grant stays in the
	// primary's memory and dies with it.
	s.Primary.MustDo("SET", "backlog", strings.Repeat("x", 32<<20))
	h := first.Lock(ctx, "job")
	mustAcquire(t, h)
	s.Primary.Kill()
	s.Replica.Continue()
	s.WaitFailover(30 * time.Second)
	if n, _ := s.Replica.MustDo("EXISTS", scripts.LockKey("job")).AsInt64(); n != 0 {
		t.Fatalf("the grant reached the replica; the window was not produced")
	}

	o := second.Lock(ctx, "job")
	mustAcquire(t, o)
	t.Logf("window: the first holder (token %d) and the second (token %d) both hold", h.Token(), o.Token())
	mustLose(t, h, holdfast.ErrNotOwner, holdfast.ErrLeaseExpired)
	if err := o.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Release(ctx); !errors.Is(err, holdfast.ErrNotHeld) {
		t.Fatalf("release of the lost hold: %v, want ErrNotHeld", err)
	}
}

// TestSentinelSemaphoreSurvivesFailover: with SyncReplicas 1, both permits
// of a semaphore of 2 are granted and the primary is SIGKILLed. After the
// Sentinels promote the replica, the permits are still held there (a third
// holder is refused), their holders are not Lost, and a release on the new
// primary wakes the waiter.
func TestSentinelSemaphoreSurvivesFailover(t *testing.T) {
	s := topology.StartSentinel(t)
	const lease = 15 * time.Second
	holder := newClient(t, s.Client(t), holdfast.Config{SyncReplicas: 1, WatchdogTimeout: lease})
	ctx := context.Background()
	a, b := holder.Semaphore(ctx, "pool", 2), holder.Semaphore(ctx, "pool", 2)
	mustAcquire(t, a)
	mustAcquire(t, b)
	s.Primary.Kill()
	start := time.Now()
	s.WaitFailover(30 * time.Second)
	t.Logf("failover took %v", time.Since(start).Round(time.Millisecond))
	notLost(t, a)
	notLost(t, b)
	keys, err := s.Replica.MustDo("KEYS", "holdfast:{pool}:sem:*").AsStrSlice()
	if err != nil || len(keys) != 2 {
		t.Fatalf("new primary's permits: %v, %v; want both", keys, err)
	}
	other := newClient(t, s.Client(t), holdfast.Config{})
	third := other.Semaphore(ctx, "pool", 2, holdfast.WithWait(time.Second))
	mustLose(t, third, holdfast.ErrWaitTimeout)
	w := other.Semaphore(ctx, "pool", 2)
	pending(t, w)
	rel := time.Now()
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Acquired:
		t.Logf("waiter granted %v after the release on the new primary", time.Since(rel).Round(time.Millisecond))
	case <-w.Lost:
		t.Fatalf("waiter lost: %v", w.Err())
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not granted within 5s of a release on the new primary")
	}
	notLost(t, b)
	w.Release(ctx)
	b.Release(ctx)
}
