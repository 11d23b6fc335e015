package deploytest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/actor"
	"github.com/holdfast/holdfast/internal/topology"
	"github.com/holdfast/holdfast/scripts"
)

// With SyncReplicas, a grant or renewal that a slot move redirects to
// another master must count the acks of the master that ran it, not of the
// one the client asked first. The two tests below move the slot of
// "sync}…" to a master whose only replica is frozen (SIGSTOP), so that
// master can never ack, while the old master's replica is in sync. Clients
// made before the move still send the slot to the old master; every grant
// and renewal they make runs on the new master, so each must fail with
// ErrReplicaSync: had its WAIT gone to the old master (as when rueidis
// follows a redirect for the script alone), the old replica's acks would
// have closed Acquired. (rueidis v1.0.79 does worse on ASK: a DoMulti with
// a blocking command that ASK redirects panics inside rueidis.)

const syncMoveTimeout = time.Second

// syncMove is the cluster and slot move of those tests.
type syncMove struct {
	c        *topology.Cluster
	move     *topology.SlotMove
	slot     uint16
	from, to *topology.Node
	frozen   *topology.Node // to's replica
	held     string         // a hold's key (owner field "f") for the renewals
}

func startSyncMove(t *testing.T) *syncMove {
	t.Helper()
	c := topology.StartClusterWithReplicas(t, 3, 1)
	s := &syncMove{c: c, slot: actor.Slot(scripts.LockKey("sync}held")), held: scripts.LockKey("sync}held")}
	s.from = c.Owner(s.slot)
	s.to = c.Masters[0]
	if s.to == s.from {
		s.to = c.Masters[1]
	}
	s.frozen = c.ReplicasOf(s.to)[0]
	s.from.MustDo("SET", s.held, scripts.Hold{Field: "f", Count: 1, Token: 1}.String(), "PX", "600000")
	return s
}

// syncClients are a Client and a Synced adapter (for renewals), each on a
// rueidis client of its own that loaded the slot map when made and makes
// no call until used.
type syncClients struct {
	hf    *holdfast.Client
	renew *actor.Synced
}

func (s *syncMove) clients(t *testing.T) syncClients {
	t.Helper()
	return syncClients{
		hf:    newClient(t, s.c.Client(t), holdfast.Config{SyncReplicas: 1, SyncTimeout: syncMoveTimeout}),
		renew: actor.NewSynced(actor.NewRueidis(s.c.Client(t)), 1, syncMoveTimeout),
	}
}

// begin freezes the new master's replica and starts the move: the slot's
// keys go to the new master, and the old one answers ASK for them.
func (s *syncMove) begin(t *testing.T) {
	t.Helper()
	s.frozen.Stop()
	t.Cleanup(s.frozen.Continue)
	s.move = s.c.BeginMove(s.slot, s.to)
	s.move.MigrateKeys()
	if n, _ := s.from.MustDo("DBSIZE").AsInt64(); n != 0 {
		t.Fatalf("%d keys left on the old master", n)
	}
}

// lockAll asks for n fresh names of the slot at once on cl, each with a
// wait budget of wait.
func lockAll(cl syncClients, prefix string, n int, wait time.Duration) []*holdfast.Lock {
	locks := make([]*holdfast.Lock, n)
	for i := range locks {
		locks[i] = cl.hf.Lock(context.Background(), fmt.Sprintf("sync}%s:%d", prefix, i), holdfast.WithWait(wait))
	}
	return locks
}

// unsynced checks that every one of locks ends with ErrReplicaSync.
func unsynced(t *testing.T, locks []*holdfast.Lock) {
	t.Helper()
	for _, l := range locks {
		select {
		case <-l.Acquired:
			t.Errorf("%q acquired on the new master, whose only replica is frozen: its acks were counted on the old master", l.Name())
			l.Release(context.Background())
		case <-l.Lost:
			if !errors.Is(l.Err(), holdfast.ErrReplicaSync) {
				t.Errorf("%q ended with %v, want ErrReplicaSync", l.Name(), l.Err())
			}
		case <-time.After(waitFor):
			t.Fatalf("%q neither acquired nor lost within %v", l.Name(), waitFor)
		}
	}
}

// renewUnsynced checks that cl's renewal of the held key fails with
// ErrReplicaSync.
func (s *syncMove) renewUnsynced(t *testing.T, cl syncClients) {
	t.Helper()
	got, err := cl.renew.Renew(context.Background(), scripts.RenewScript, []string{s.held}, []string{"f", "600000"})
	if !errors.Is(err, holdfast.ErrReplicaSync) {
		t.Errorf("renewal on the new master: %v, %v; want ErrReplicaSync (its only replica is frozen)", got, err)
	}
}

// TestClusterSyncSlotMoving: a renewal and grants while the slot is being
// moved, its keys already on the new master: the old master answers ASK.
// The renewal (one key) runs on the new master after ASKING. A grant's
// script has several keys, of which the fresh name's is on neither master:
// the new master answers TRYAGAIN until the move ends, and the grants,
// retried, run on the new master after it (the old master answers MOVED).
func TestClusterSyncSlotMoving(t *testing.T) {
	s := startSyncMove(t)
	cl := s.clients(t)
	s.begin(t)
	s.renewUnsynced(t, cl)
	locks := lockAll(cl, "ask", 4, waitFor/2)
	time.Sleep(500 * time.Millisecond) // the grants meet the move under way
	for _, l := range locks {
		pending(t, l)
	}
	s.move.Finish()
	unsynced(t, locks)
}

// TestClusterSyncSlotMoved: grants and a renewal after the move, from
// clients that still send the slot to the old master, which answers MOVED.
// Once the new master's replica is thawed, a grant and a renewal so
// redirected sync on the new master.
func TestClusterSyncSlotMoved(t *testing.T) {
	s := startSyncMove(t)
	cl, after := s.clients(t), s.clients(t)
	s.begin(t)
	s.move.Finish()
	if got := s.c.Owner(s.slot); got != s.to {
		t.Fatalf("slot %d on %s after the move, want %s", s.slot, got.Addr, s.to.Addr)
	}
	unsynced(t, lockAll(cl, "moved", 4, 0))
	s.renewUnsynced(t, cl)
	if t.Failed() {
		return
	}

	s.frozen.Continue()
	topology.Eventually(t, waitFor, "the new master's replica in sync", func() bool {
		return s.frozen.Info("replication", "master_link_status") == "up"
	})
	ctx := context.Background()
	l := after.hf.Lock(ctx, "sync}after")
	mustAcquire(t, l)
	if v, _ := s.to.MustDo("GET", scripts.LockKey("sync}after")).ToString(); v == "" {
		t.Fatal("the grant's key is not on the new master")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	got, err := after.renew.Renew(ctx, scripts.RenewScript, []string{s.held}, []string{"f", "600000"})
	if err != nil || len(got) != 1 || !got[0] {
		t.Fatalf("renewal on the new master after the thaw: %v, %v; want [true]", got, err)
	}
}
