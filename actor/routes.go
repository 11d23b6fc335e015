package actor

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/internal/keyslot"
	"github.com/holdfast/holdfast/pubsub"
)

// nodeRoutes is a cluster's slot map as the renewals use it: which master
// serves each slot, read with CLUSTER SHARDS when first needed and again
// once a renewal found it stale. It only decides which node a renewal is
// sent to first: a node that does not serve a key says so, and the key goes
// again through the path that follows redirects, so a stale map costs calls,
// never a renewal counted on the wrong node.
type nodeRoutes struct {
	cur   atomic.Pointer[slotRoutes]
	stale atomic.Bool
	// off is set once a node refused the cross-slot variant (Redis before
	// 7.0): renewals go by slot from then on.
	off atomic.Bool

	readMu sync.Mutex // one CLUSTER SHARDS at a time
}

// slotRoutes is one reading of the slot map.
type slotRoutes struct {
	addr *pubsub.SlotMap
	// group is the renewal group of each slot: nodeGroups plus the number
	// of its master, or the slot itself where no master serves it.
	group [keyslot.Count]uint16
}

// nodeGroups is the first renewal group that stands for a node: below it,
// a group is a slot (keyslot.Count of them).
const nodeGroups = keyslot.Count

// current returns the slot map, read again first (within ctx) when there
// is none or it is stale; nil when it cannot be read (the renewals then go
// by slot).
func (n *nodeRoutes) current(ctx context.Context, rc rueidis.Client) *slotRoutes {
	if cur := n.cur.Load(); cur != nil && !n.stale.Load() {
		return cur
	}
	n.readMu.Lock()
	defer n.readMu.Unlock()
	if cur := n.cur.Load(); cur != nil && !n.stale.Load() {
		return cur
	}
	n.stale.Store(false)
	addr, err := pubsub.ReadSlots(ctx, rc)
	if err != nil {
		n.stale.Store(true)
		return n.cur.Load()
	}
	sr := &slotRoutes{addr: addr}
	nodes := map[string]uint16{}
	for slot, a := range addr {
		if a == "" {
			sr.group[slot] = uint16(slot)
			continue
		}
		id, ok := nodes[a]
		if !ok {
			id = nodeGroups + uint16(len(nodes))
			nodes[a] = id
		}
		sr.group[slot] = id
	}
	n.cur.Store(sr)
	return sr
}

// group is the renewal group of key: its master's, as the last reading of
// the slot map says, or its slot before the first reading.
func (n *nodeRoutes) group(key string) uint16 {
	slot := Slot(key)
	cur := n.cur.Load()
	if cur == nil || n.off.Load() {
		return slot
	}
	return cur.group[slot]
}
