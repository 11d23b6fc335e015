package sim

import (
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/scripts"
)

// Faults the World can inject.

// Failover promotes the replica that applied the most of the primary's log;
// the old primary goes down and the writes its replicas had not applied are
// lost. Clients reconnect: their subscriptions resync. It reports whether
// writes were lost. With no replica it does nothing.
func (w *World) Failover() (lost bool) {
	best := -1
	for i, n := range w.nodes {
		if i != w.primary && n.up && (best < 0 || n.applied > w.nodes[best].applied) {
			best = i
		}
	}
	if best < 0 {
		return false
	}
	old := w.nodes[w.primary]
	lost = w.nodes[best].applied < len(old.Log())
	old.up = false
	w.primary = best
	promoted := w.nodes[best]
	promoted.log = nil
	for i, n := range w.nodes {
		if i != best && n.up {
			n.copyFrom(promoted.Node)
			n.applied = 0
		}
	}
	if lost {
		w.generation++
		w.disrupted("")
	}
	w.epoch++
	w.reconnectAll()
	return lost
}

// RestartPrimary restarts the primary without persistence: every key is
// gone (and the fencing counters with them). Replicas resync from it.
func (w *World) RestartPrimary() {
	p := w.nodes[w.primary]
	p.Reset()
	for i, n := range w.nodes {
		if i != w.primary {
			n.Reset()
			n.applied = 0
		}
	}
	w.generation++
	w.disrupted("")
	w.epoch++
	w.reconnectAll()
}

// RestartPrimaryPersisted restarts the primary with persistence that loses
// nothing (appendfsync always): its keys, fencing counters included, come
// back as they were; connections drop and clients resync.
func (w *World) RestartPrimaryPersisted() {
	w.epoch++
	w.reconnectAll()
}

// Revive brings a node that failed over back, as a replica of the primary.
func (w *World) Revive() {
	for i, n := range w.nodes {
		if !n.up && i != w.primary {
			n.copyFrom(w.nodes[w.primary].Node)
			n.applied = len(w.nodes[w.primary].Log())
			n.up = true
		}
	}
}

// Steal deletes the lock key of name on the primary behind its holder's
// back, as an operator's DEL would (holdfast's key, and the name itself:
// the lock hash of the Redisson layout).
func (w *World) Steal(name string) {
	w.nodes[w.primary].Do("DEL", scripts.LockKey(name))
	w.nodes[w.primary].Do("DEL", name)
	w.replicate()
	w.disrupted(name)
}

// Disruption is a fault that can end a hold behind its holder's back: a
// data roll-back (which can end any hold) or the theft of one lock's key.
// Holdfast promises exclusion only between holds granted on the same side of
// every disruption; a checker exempts a pair of overlapping holds only when
// one lies between their grants.
type Disruption struct {
	At   time.Time
	Name string // the stolen lock's name; "" for a roll-back
	// Generation is the data generation after the disruption.
	Generation int
}

// Disruptions returns every roll-back and key theft so far, in order.
func (w *World) Disruptions() []Disruption { return w.disruptions }

func (w *World) disrupted(name string) {
	w.disruptions = append(w.disruptions, Disruption{At: w.now, Name: name, Generation: w.generation})
}

// Partition cuts client c off from every node (requests, replies and
// pub/sub are lost) until Heal.
func (w *World) Partition(c *holdfast.Client) { w.client(c).partitioned = true }

// Heal ends every partition and stops dropping pub/sub messages.
func (w *World) Heal() {
	for _, c := range w.clients {
		if c.partitioned {
			c.partitioned = false
			w.resync(c)
		}
	}
	w.dropPubSub = 0
}

// DropPubSub makes each pub/sub message be lost with probability p.
func (w *World) DropPubSub(p float64) { w.dropPubSub = p }

// Pause stops client c: it processes nothing and its timers do not fire
// until Resume (a GC pause, a stopped VM).
func (w *World) Pause(c *holdfast.Client) { w.client(c).paused = true }

// Resume restarts a paused client; what it missed happens now.
func (w *World) Resume(c *holdfast.Client) {
	sc := w.client(c)
	sc.paused = false
	for _, e := range sc.deferred {
		w.at(w.now, sc, e.fn)
	}
	sc.deferred = nil
}

func (w *World) reconnectAll() {
	for _, c := range w.clients {
		w.resync(c)
	}
}

// resync tells every machine of c that waits on a channel to re-check Redis,
// as the pub/sub manager does after a reconnect.
func (w *World) resync(c *engine) {
	w.resyncObservers(c)
	for _, name := range c.names() {
		if c.machines[name].subscribed {
			w.at(w.now.Add(w.delay()), c, func() {
				c.deliver(name, lockactor.Msg{Kind: lockactor.MsgResync})
			})
		}
	}
}

func (n *node) copyFrom(src *Node) {
	n.Reset()
	for k, e := range src.data {
		c := &entry{expireAt: e.expireAt}
		if e.str != nil {
			s := *e.str
			c.str = &s
		} else if e.coll != nil {
			c.coll = e.coll.clone()
		} else {
			c.hash = make(map[string]string, len(e.hash))
			for f, v := range e.hash {
				c.hash[f] = v
			}
		}
		n.data[k] = c
	}
}
