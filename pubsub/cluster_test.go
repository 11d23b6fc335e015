package pubsub_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/holdfast/holdfast/internal/topology"
	"github.com/holdfast/holdfast/pubsub"
)

// TestClusterSharded: on a cluster the Manager subscribes with SSUBSCRIBE,
// one dedicated connection per master, and SPUBLISH reaches the listeners.
// When a channel's slot moves, the listener is told Resync and the channel
// is subscribed on the new master, where messages reach it again.
func TestClusterSharded(t *testing.T) {
	c := topology.StartCluster(t, 3)
	rc := c.Client(t)
	m := pubsub.New(pubsub.Config{Redis: rc})
	defer m.Close()
	ctx := context.Background()

	const n = 60
	recs := make([]*recorder, n)
	names := make([]string, n)
	for i := range recs {
		names[i] = fmt.Sprintf("holdfast:{n%d}:ch", i)
		recs[i] = newRecorder()
		defer m.Subscribe(names[i], recs[i].fn)()
	}
	for _, r := range recs {
		r.expect(t, pubsub.Subscribed)
	}
	for _, node := range c.Masters {
		list, err := node.MustDo("CLIENT", "LIST", "TYPE", "pubsub").ToString()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(list, "\n"); got != 1 {
			t.Fatalf("%s has %d pub/sub connections, want 1:\n%s", node.Addr, got, list)
		}
		if chs, _ := node.MustDo("PUBSUB", "CHANNELS").AsStrSlice(); len(chs) != 0 {
			t.Fatalf("plain subscriptions on %s: %v", node.Addr, chs)
		}
	}
	spublish := func(ch string) {
		t.Helper()
		if err := rc.Do(ctx, rc.B().Spublish().Channel(ch).Message("released").Build()).Error(); err != nil {
			t.Fatalf("SPUBLISH %s: %v", ch, err)
		}
	}
	for i, r := range recs {
		spublish(names[i])
		r.expect(t, pubsub.Message)
	}

	moved := names[0]
	slot := pubsub.Slot(moved)
	from := c.Owner(slot)
	to := c.Masters[0]
	if to == from {
		to = c.Masters[1]
	}
	c.MoveSlot(slot, to)
	recs[0].expect(t, pubsub.Resync)
	spublish(moved)
	recs[0].expect(t, pubsub.Message)
	for _, r := range recs[1:] {
		r.expectNone(t)
	}
}
