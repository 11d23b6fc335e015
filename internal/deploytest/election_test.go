package deploytest

import (
	"context"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/actor"
	"github.com/holdfast/holdfast/internal/topology"
	"github.com/holdfast/holdfast/scripts"
)

// observed waits up to 3s for a state on ch that satisfies ok.
func observed(t *testing.T, ch <-chan holdfast.Leader, what string, ok func(holdfast.Leader) bool) holdfast.Leader {
	t.Helper()
	deadline := time.After(3 * time.Second)
	for {
		select {
		case st, open := <-ch:
			if !open {
				t.Fatalf("%s: observer channel closed", what)
			}
			if ok(st) {
				return st
			}
		case <-deadline:
			t.Fatalf("%s: not observed within 3s", what)
		}
	}
}

// TestClusterElection: on names of every master, a leader's resignation
// hands over to a candidate of another process, and an observer in the
// candidate's process — sharing its one SSUBSCRIBE on the name's master —
// sees the state, the new leader with a higher term, and the vacancy once
// it resigns too.
func TestClusterElection(t *testing.T) {
	c := topology.StartCluster(t, 3)
	a := newClient(t, c.Client(t), holdfast.Config{})
	b := newClient(t, c.Client(t), holdfast.Config{})
	ctx := context.Background()
	for _, name := range namesOnEachNode(t, c, "elect:") {
		la := a.Elect(ctx, name, "a")
		mustAcquire(t, la)
		states := b.Observe(t.Context(), name)
		observed(t, states, name+": the first leader", func(st holdfast.Leader) bool {
			return st == holdfast.Leader{Value: "a", Term: la.Token()}
		})
		lb := b.Elect(ctx, name, "b")
		owner := c.Owner(actor.Slot(scripts.LockKey(name)))
		topology.Eventually(t, waitFor, "the candidate waiting", func() bool {
			select {
			case <-lb.Lost:
				t.Fatalf("%s: candidate over: %v", name, lb.Err())
			default:
			}
			return shardNumsub(t, owner, scripts.Channel(name)) == 1
		})
		time.Sleep(50 * time.Millisecond)
		pending(t, lb)
		if n := shardNumsub(t, owner, scripts.Channel(name)); n != 1 {
			t.Fatalf("%s: %d subscriptions for the candidate and the observer of one process, want 1", name, n)
		}
		start := time.Now()
		if err := la.Release(ctx); err != nil {
			t.Fatal(err)
		}
		mustAcquire(t, lb)
		t.Logf("%s: the candidate leads %v after the resignation", name, time.Since(start).Round(time.Millisecond))
		if lb.Token() <= la.Token() {
			t.Fatalf("%s: term %d after %d", name, lb.Token(), la.Token())
		}
		observed(t, states, name+": the new leader", func(st holdfast.Leader) bool {
			return st == holdfast.Leader{Value: "b", Term: lb.Token()}
		})
		if err := lb.Release(ctx); err != nil {
			t.Fatal(err)
		}
		observed(t, states, name+": the vacancy", func(st holdfast.Leader) bool { return st == holdfast.Leader{} })
	}
}

// TestSentinelElectionSurvivesFailover: with SyncReplicas 1 the primary is
// SIGKILLed while a leader leads. After the Sentinels promote the replica
// the leader still leads (with the same term) and no observer is told
// otherwise: it may be told that it cannot read Redis (the leader it read
// last, with Err) while the primary is gone, and then the leader again; its
// resignation then reaches the observer and the candidate through pub/sub
// on the new primary.
func TestSentinelElectionSurvivesFailover(t *testing.T) {
	s := topology.StartSentinel(t)
	const lease = 15 * time.Second
	leader := newClient(t, s.Client(t), holdfast.Config{SyncReplicas: 1, WatchdogTimeout: lease})
	other := newClient(t, s.Client(t), holdfast.Config{})
	ctx := context.Background()

	l := leader.Elect(ctx, "primary", "leader")
	mustAcquire(t, l)
	states := other.Observe(t.Context(), "primary")
	observed(t, states, "the leader", func(st holdfast.Leader) bool { return st.Term == l.Token() })
	s.Primary.Kill()
	cand := other.Elect(ctx, "primary", "candidate")

	start := time.Now()
	s.WaitFailover(30 * time.Second)
	t.Logf("failover took %v", time.Since(start).Round(time.Millisecond))
	topology.Eventually(t, lease, "a renewal on the new primary", func() bool {
		ttl, _ := s.Replica.MustDo("PTTL", scripts.LockKey("primary")).AsInt64()
		return time.Duration(ttl)*time.Millisecond > lease-time.Since(start)+time.Second
	})
	notLost(t, l)
	pending(t, cand)
	if got, err := other.Leader(ctx, "primary"); err != nil || got.Term != l.Token() {
		t.Fatalf("Leader after the failover = %+v, %v; want term %d", got, err, l.Token())
	}
	kept := holdfast.Leader{Value: "leader", Term: l.Token()}
	st := observed(t, states, "the leader read again after the failover", func(st holdfast.Leader) bool {
		if st.Value != kept.Value || st.Term != kept.Term {
			t.Fatalf("observer told %+v through a failover that kept the leader", st)
		}
		return st.Err == nil
	})
	t.Logf("the observer read the leader again: %+v", st)
	select {
	case st := <-states:
		t.Fatalf("observer told %+v after reading the leader again", st)
	default:
	}

	rel := time.Now()
	if err := l.Release(ctx); err != nil {
		t.Fatalf("resign after the failover: %v", err)
	}
	mustAcquire(t, cand)
	t.Logf("the candidate leads %v after the resignation on the new primary", time.Since(rel).Round(time.Millisecond))
	observed(t, states, "the new leader", func(st holdfast.Leader) bool { return st.Term == cand.Token() && st.Value == "candidate" })
	cand.Release(ctx)
}
