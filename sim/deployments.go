package sim

import (
	"fmt"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/lockactor"
)

// Deployment is an independent Redis deployment inside a World, beside the
// World's own (its Primary and replicas): a primary and one replica that
// applies its writes up to Config.ReplicationLag late. Clients made with its
// NewClient send every call to it; they share the World's time, network and
// scheduler with every other client, so a RedLock or LockAll over several
// deployments runs in one reproducible schedule.
//
// The faults of a deployment are the ones that matter to RedLock: Failover
// (losing the writes the replica had not applied), Restart (empty, as
// without persistence) and Down/Up (unreachable, data kept). Failover and
// Restart take an away time during which the node answers nothing: Redlock's
// safety needs a node that lost data to stay away for a lease ("delayed
// restart"); zero brings it back at once, which is what breaks it.
type Deployment struct {
	w                *World
	id               int
	primary, replica *node
	// generation counts this deployment's data roll-backs; epoch changes
	// with each, dropping replication in flight.
	generation, epoch int
}

// NewDeployment adds an independent deployment to the World.
func (w *World) NewDeployment() *Deployment {
	if w.bound == nil {
		w.bound = make(map[*engine]*Deployment)
	}
	d := &Deployment{w: w, id: len(w.bound) + 1}
	d.primary, d.replica = d.newNode(), d.newNode()
	return d
}

func (d *Deployment) newNode() *node {
	n := &node{Node: NewNode(d.w.Now), up: true}
	n.OnPublish = d.w.publish
	return n
}

// NewClient returns a holdfast Client of the World whose calls go to d.
func (d *Deployment) NewClient(cfg ClientConfig) *holdfast.Client {
	pub := d.w.NewClient(cfg)
	d.w.bound[d.w.clients[len(d.w.clients)-1]] = d
	return pub
}

// Node returns d's primary, for inspection (Do) and faults of your own.
func (d *Deployment) Node() *Node { return d.primary.Node }

// Generation counts d's data roll-backs so far.
func (d *Deployment) Generation() int { return d.generation }

// Up reports whether d's primary answers.
func (d *Deployment) Up() bool { return d.primary.up }

// Down makes d's primary unreachable (its data is kept) until Revive.
func (d *Deployment) Down() { d.primary.up = false }

// Revive makes d's primary reachable again.
func (d *Deployment) Revive() {
	if !d.primary.up {
		d.primary.up = true
		d.resync()
	}
}

// Failover promotes the replica: the writes it had not applied are lost
// (reported). The new primary is away for away, then answers.
func (d *Deployment) Failover(away time.Duration) (lost bool) {
	old := d.primary
	lost = d.replica.applied < len(old.Log())
	d.primary = d.replica
	d.primary.log, d.primary.applied = nil, 0
	d.replica = d.newNode()
	d.replica.copyFrom(d.primary.Node)
	if lost {
		d.generation++
	}
	d.epoch++
	d.away(away)
	return lost
}

// Restart restarts d without persistence: every key is gone, fencing
// counters included. The node is away for away, then answers.
func (d *Deployment) Restart(away time.Duration) {
	d.primary.Reset()
	d.replica.Reset()
	d.replica.applied = 0
	d.generation++
	d.epoch++
	d.away(away)
}

func (d *Deployment) away(away time.Duration) {
	if away <= 0 {
		d.resync()
		return
	}
	d.primary.up = false
	n := d.primary
	d.w.at(d.w.now.Add(away), nil, func() {
		if d.primary == n {
			d.Revive()
		}
	})
}

// resync tells d's clients' waiters to re-check, as after a reconnect.
func (d *Deployment) resync() {
	for _, c := range d.w.clients { // in creation order: reproducible
		if d.w.bound[c] == d {
			d.w.resync(c)
		}
	}
}

// replicate schedules the replica to apply the primary's log as it is now.
func (d *Deployment) replicate() {
	p, r, epoch := d.primary, d.replica, d.epoch
	upto := len(p.Log())
	lag := time.Duration(d.w.rng.Int63n(int64(d.w.cfg.ReplicationLag) + 1))
	d.w.at(d.w.now.Add(lag), nil, func() {
		if d.epoch != epoch || d.primary != p {
			return
		}
		for ; r.applied < upto; r.applied++ {
			r.Apply(p.Log()[r.applied])
		}
	})
}

// route returns the node c's calls go to now, the data generation it is in,
// and how to replicate a write made there.
func (w *World) route(c *engine) (*node, int, func()) {
	if d := w.bound[c]; d != nil {
		return d.primary, d.generation, d.replicate
	}
	return w.nodes[w.primary], w.generation, w.replicate
}

// Eval runs a script call for its Client's composite locks (the RedLock fence
// call) through the World's network, as the lock scripts are, and calls done
// with its integer reply inside the World's schedule.
func (c *engine) Eval(script string, keys, args []string, done func(int64, error)) {
	c.w.external(func() {
		c.w.send(c, script, keys, args, func(r Reply, f lockactor.Fault) {
			if f != lockactor.NoFault {
				err := r.errOrNil()
				if err == nil {
					err = fmt.Errorf("sim: call failed (%v)", f)
				}
				done(0, err)
				return
			}
			done(r.Int, nil)
		})
	})
}
