package topology

import (
	"context"
	"testing"
	"time"

	"github.com/holdfast/holdfast/actor"
)

// TestCluster builds a 3-master cluster, writes through a cluster client and
// moves the key's slot: the key moves with it and the client follows.
func TestCluster(t *testing.T) {
	c := StartCluster(t, 3)
	rc := c.Client(t)
	ctx := context.Background()
	if err := rc.Do(ctx, rc.B().Set().Key("{k}a").Value("1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	slot := actor.Slot("{k}a")
	from := c.Owner(slot)
	to := c.Masters[0]
	if to == from {
		to = c.Masters[1]
	}
	c.MoveSlot(slot, to)
	if got := c.Owner(slot); got != to {
		t.Fatalf("slot %d on %s after the move, want %s", slot, got.Addr, to.Addr)
	}
	if v, err := rc.Do(ctx, rc.B().Get().Key("{k}a").Build()).ToString(); err != nil || v != "1" {
		t.Fatalf("GET after the move: %q, %v", v, err)
	}
	if n, _ := from.MustDo("DBSIZE").AsInt64(); n != 0 {
		t.Fatalf("the source still has %d keys", n)
	}
}

// TestSentinelFailover kills the primary: the Sentinels promote the replica
// and a Sentinel client writes to it.
func TestSentinelFailover(t *testing.T) {
	s := StartSentinel(t)
	rc := s.Client(t)
	ctx := context.Background()
	if err := rc.Do(ctx, rc.B().Set().Key("k").Value("1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	s.Primary.Kill()
	s.WaitFailover(20 * time.Second)
	Eventually(t, 10*time.Second, "writes reach the new primary", func() bool {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return rc.Do(ctx, rc.B().Set().Key("k").Value("2").Build()).Error() == nil
	})
	if v, _ := s.Replica.MustDo("GET", "k").ToString(); v != "2" {
		t.Fatalf("new primary has k=%q, want 2", v)
	}
}
