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
//
// The map is read beside the renewals (refresh, which the renewal batcher
// runs on a goroutine of its own), never in front of them: a round sends
// with the map it has. A keyless command sent through the cluster client
// may land on any node it knows, a frozen replica among them, so the read
// goes to the node most likely to answer (pick), bounded by its context.
type nodeRoutes struct {
	cur   atomic.Pointer[slotRoutes]
	stale atomic.Bool
	// off is set once a node refused the cross-slot variant (Redis before
	// 7.0): renewals go by slot from then on.
	off atomic.Bool

	// readMu is held across a CLUSTER SHARDS read: one at a time. It is
	// only ever tried (TryLock), never waited for, so that nothing queues
	// behind a read that lands on a silent node.
	readMu sync.Mutex

	newsMu sync.Mutex // guards the fields below
	// news is what each node's last exchanges told: when it last answered
	// and last failed to, on a clock of events (seq), not of time.
	news map[string]nodeNews
	seq  uint64
}

// nodeNews is when a node last answered and last failed to answer, in
// nodeRoutes.seq; 0 for never.
type nodeNews struct{ answered, failed uint64 }

// slotRoutes is one reading of the slot map.
type slotRoutes struct {
	addr *pubsub.SlotMap
	// group is the renewal group of each slot: nodeGroups plus the number
	// of its master, or the slot itself where no master serves it.
	group [keyslot.Count]uint16
	// masters are the addresses of the masters that serve a slot.
	masters map[string]bool
}

// nodeGroups is the first renewal group that stands for a node: below it,
// a group is a slot (keyslot.Count of them).
const nodeGroups = keyslot.Count

// newSlotRoutes makes the renewal groups of a slot map.
func newSlotRoutes(addr *pubsub.SlotMap) *slotRoutes {
	sr := &slotRoutes{addr: addr, masters: map[string]bool{}}
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
			sr.masters[a] = true
		}
		sr.group[slot] = id
	}
	return sr
}

// routes returns the slot map as last read, without reading it: nil
// before the first reading.
func (n *nodeRoutes) routes() *slotRoutes { return n.cur.Load() }

// needsRead tells whether the map is missing or stale.
func (n *nodeRoutes) needsRead() bool {
	return n.cur.Load() == nil || n.stale.Load()
}

// refresh reads the slot map again, within ctx, when there is none or it
// is stale, from the node pick chooses among rc's. It returns at once when
// another read is out. A failed read leaves the map as it was, stale: the
// next refresh tries again, first on another node.
func (n *nodeRoutes) refresh(ctx context.Context, rc rueidis.Client) {
	if !n.needsRead() || !n.readMu.TryLock() {
		return
	}
	defer n.readMu.Unlock()
	if !n.needsRead() {
		return
	}
	nodes := rc.Nodes()
	addr, node := n.pick(nodes)
	if node == nil {
		return
	}
	// Cleared before the read: a renewal that finds the map stale while
	// the read is out marks it again, for the next refresh.
	n.stale.Store(false)
	slots, err := pubsub.ReadSlots(ctx, node)
	if err != nil {
		n.stale.Store(true)
		n.heard(addr, false)
		return
	}
	n.heard(addr, true)
	n.forget(nodes)
	n.cur.Store(newSlotRoutes(slots))
}

// forget drops what was heard of the nodes that are not among nodes (the
// client's nodes now), so that the news kept is bounded by the cluster.
func (n *nodeRoutes) forget(nodes map[string]rueidis.Client) {
	n.newsMu.Lock()
	defer n.newsMu.Unlock()
	for addr := range n.news {
		if _, ok := nodes[addr]; !ok {
			delete(n.news, addr)
		}
	}
}

// heard records that the node at addr answered (ok) or failed to answer a
// command.
func (n *nodeRoutes) heard(addr string, ok bool) {
	n.newsMu.Lock()
	defer n.newsMu.Unlock()
	if n.news == nil {
		n.news = map[string]nodeNews{}
	}
	n.seq++
	nn := n.news[addr]
	if ok {
		nn.answered = n.seq
	} else {
		nn.failed = n.seq
	}
	n.news[addr] = nn
}

// pick chooses the node of nodes to read the slot map from: the one that
// answered last, if any answered since it last failed; else a master of
// the last map that no exchange told of yet; else any node no exchange
// told of (a replica, or a node first met); else the node whose failure is
// the oldest, so that reads that keep failing go round the nodes. Ties go
// to the lowest address, so the choice is the same on every run.
func (n *nodeRoutes) pick(nodes map[string]rueidis.Client) (string, rueidis.Client) {
	var masters map[string]bool
	if cur := n.cur.Load(); cur != nil {
		masters = cur.masters
	}
	n.newsMu.Lock()
	defer n.newsMu.Unlock()
	best, bestRank := "", nodeRank{}
	for addr := range nodes {
		r := n.rankLocked(addr, masters)
		if best == "" || r.before(bestRank) || (r == bestRank && addr < best) {
			best, bestRank = addr, r
		}
	}
	if best == "" {
		return "", nil
	}
	return best, nodes[best]
}

// nodeRank orders the nodes for pick: by class, then by key within it.
type nodeRank struct {
	class int    // 0 answered last, 1 master untold, 2 untold, 3 failed last
	key   uint64 // smaller first
}

func (r nodeRank) before(o nodeRank) bool {
	return r.class < o.class || (r.class == o.class && r.key < o.key)
}

func (n *nodeRoutes) rankLocked(addr string, masters map[string]bool) nodeRank {
	nn, told := n.news[addr]
	switch {
	case told && nn.answered > nn.failed:
		return nodeRank{class: 0, key: ^nn.answered} // the latest answer first
	case told:
		return nodeRank{class: 3, key: nn.failed}
	case masters[addr]:
		return nodeRank{class: 1}
	default:
		return nodeRank{class: 2}
	}
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
