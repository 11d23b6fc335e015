package sim

import (
	"fmt"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/scripts"
)

// Observer is a simulated Client.Observe: one observer of an election name
// in one simulated Client. It runs what production's observer runs — the
// decisions of lockactor.Observer (what is news, when to read again) over
// reads of elect_read.lua — with the World's network, pub/sub, pauses and
// faults in place of Redis connections and the timer wheel: it reads once
// subscribed, when a message comes on the name's channel, when its
// subscription is re-made (a failover, a healed partition, a lost message:
// Redis drops pub/sub messages only with their connection, which the
// pub/sub manager re-makes and resyncs; production also reads when the
// connection breaks, which the World's failovers and restarts stand for by
// resyncing at once), and when the wait the decisions ask for runs out (the
// leader's lease, or a backoff after a failed read). Reads do not overlap:
// a poke during a read asks for one more after it. A read that fails (a
// timeout, a partition) goes to the decisions as production's does, which
// tell it once with Err.
//
// Where production sends each state on a 1-buffered channel, an Observer
// keeps every state it told, in order (States), as a reader that keeps up
// would see them — a failed read's state (Err set) included — with when it
// was told and the data generation its read ran in (Generation).
type Observer struct {
	c    *engine
	name string
	view lockactor.Observer
	// told holds every state told, in order; at is when each was told,
	// gen the data generation of the read that told it (for a failed
	// read, of the last read that succeeded; -1 before any).
	told    []holdfast.Leader
	at      []time.Time
	gen     []int
	lastGen int
	// reading: a read is in flight; again: a poke came meanwhile.
	reading, again bool
	// timerGen tells the current arming of the re-read timer from
	// earlier ones (0: none armed).
	timerGen, timers uint64
	stopped          bool
	// reads counts the reads sent, for tests of cost.
	reads int
}

// Observe starts an observer of name on simulated Client c, as c.Observe
// would in production (where the simulator's Clients' own Observe returns a
// closed channel: they have no Redis connection). The observer runs until
// Stop or c's Close.
func (w *World) Observe(c *holdfast.Client, name string) *Observer {
	sc := w.client(c)
	if err := scripts.ValidateName(name); err != nil {
		panic(fmt.Sprintf("sim: Observe(%q): %v", name, err))
	}
	o := &Observer{c: sc, name: name, lastGen: -1}
	sc.observers = append(sc.observers, o)
	// Subscribed: read once Redis would tell every later change.
	w.at(w.now.Add(w.delay()), sc, o.poke)
	return o
}

// States returns every state o told, in order.
func (o *Observer) States() []holdfast.Leader { return o.told }

// Latest returns the last state o told, and whether it told one.
func (o *Observer) Latest() (holdfast.Leader, bool) {
	st, ok := o.view.Told()
	return holdfast.Leader(st), ok
}

// ToldAt returns when o told its i-th state (World time).
func (o *Observer) ToldAt(i int) time.Time { return o.at[i] }

// Generation returns the data generation (World.Generation) in which the
// read that told o's i-th state ran; for a failed read, that of the last
// read that succeeded before it (-1: none).
func (o *Observer) Generation(i int) int { return o.gen[i] }

// Reads reports how many reads o sent.
func (o *Observer) Reads() int { return o.reads }

// Stop ends o, as the end of Observe's ctx does.
func (o *Observer) Stop() { o.stopped = true; o.timerGen = 0 }

// Name is the election o observes.
func (o *Observer) Name() string { return o.name }

// poke asks for a read, now or after the one in flight.
func (o *Observer) poke() {
	if o.stopped || o.c.closed {
		return
	}
	if o.reading {
		o.again = true
		return
	}
	o.reading = true
	o.reads++
	w := o.c.w
	// As production: the lease read runs from when the script ran, after
	// now, so the next look counts from the send.
	sent := o.c.now()
	w.send(o.c, scripts.ElectRead, scripts.ElectReadKeys(o.name), nil, func(r Reply, f lockactor.Fault) {
		o.reading = false
		if o.stopped || o.c.closed {
			return
		}
		st, ttl, err := decodeElectRead(r)
		if f != lockactor.NoFault && err == nil {
			err = fmt.Errorf("elect_read answered %v", r)
		}
		if err != nil {
			// As production's, a pointer: states compare with ==.
			tell, next := o.view.Failed(fmt.Errorf("sim: reading the leader of %q: %w", o.name, err))
			if tell {
				o.record()
			}
			o.arm(o.c.now().Add(next))
		} else {
			o.lastGen = o.c.execGen
			tell, next, arm := o.view.Read(lockactor.LeaderState(st), ttl)
			if tell {
				o.record()
			}
			if arm {
				o.arm(sent.Add(next))
			} else {
				o.timerGen = 0
			}
		}
		if o.again {
			o.again = false
			o.poke()
		}
	})
}

// record keeps the state o's decisions just told.
func (o *Observer) record() {
	st, _ := o.view.Told()
	o.told = append(o.told, holdfast.Leader(st))
	o.at = append(o.at, o.c.w.now)
	o.gen = append(o.gen, o.lastGen)
}

// arm has o read again when its client's clock reads t.
func (o *Observer) arm(t time.Time) {
	o.timers++
	gen := o.timers
	o.timerGen = gen
	c := o.c
	at := c.worldTime(t)
	if at.Before(c.w.now) {
		at = c.w.now
	}
	c.w.at(at, c, func() {
		if o.timerGen == gen {
			o.timerGen = 0
			o.poke()
		}
	})
}

// decodeElectRead decodes elect_read.lua's reply as Client.Leader does;
// another kind's name reads as nobody leading, as Observe's reads do.
func decodeElectRead(r Reply) (holdfast.Leader, time.Duration, error) {
	if r.IsError() {
		return holdfast.Leader{}, 0, r.Err()
	}
	if r.Kind != ReplyArray || len(r.Array) == 0 || r.Array[0].Kind != ReplyInt {
		return holdfast.Leader{}, 0, fmt.Errorf("sim: elect_read reply %v", r)
	}
	first := r.Array[0].Int
	switch {
	case first == 0 || first == -2:
		return holdfast.Leader{}, 0, nil
	case first < 0 || len(r.Array) != 5:
		return holdfast.Leader{}, 0, fmt.Errorf("sim: elect_read reply %v", r)
	}
	ttl := time.Duration(r.Array[1].Int) * time.Millisecond
	if r.Array[1].Int < 0 {
		ttl = -1
	}
	return holdfast.Leader{Value: r.Array[2].Str, Term: uint64(first)}, ttl, nil
}

// Leader reads name's leader on the primary now, with elect_read.lua, as
// Client.Leader would with no network between: the truth observers are
// judged by. TTL is the leader's remaining lease (-1: no expiry; 0 when
// nobody leads).
func (w *World) Leader(name string) (holdfast.Leader, time.Duration, error) {
	return decodeElectRead(w.nodes[w.primary].Eval(scripts.ElectRead, scripts.ElectReadKeys(name), nil))
}

// publishToObservers carries a message on name's channel to every client
// that observes name (one subscription per client) and returns how many
// it reached. A message DropPubSub drops is lost with its connection:
// Redis drops pub/sub messages only by closing a connection whose buffer
// overflowed, and the pub/sub manager re-makes it and resyncs, which the
// client's observers hear after a reconnect delay of up to half a second.
func (w *World) publishToObservers(name string) int64 {
	var n int64
	for _, c := range w.clients {
		var os []*Observer
		for _, o := range c.observers {
			if o.name == name && !o.stopped {
				os = append(os, o)
			}
		}
		if len(os) == 0 || c.partitioned {
			continue
		}
		n++
		d := w.delay()
		if w.dropPubSub > 0 && w.rng.Float64() < w.dropPubSub {
			d += time.Duration(w.rng.Int63n(int64(observeReconnect) + 1))
		}
		for _, o := range os {
			w.at(w.now.Add(d), c, o.poke)
		}
	}
	return n
}

// observeReconnect bounds how long a client's pub/sub connection takes to
// come back after Redis dropped it.
const observeReconnect = 500 * time.Millisecond

// resyncObservers has every observer of c read again, as the pub/sub
// manager's Resync after a reconnect.
func (w *World) resyncObservers(c *engine) {
	for _, o := range c.observers {
		if !o.stopped {
			w.at(w.now.Add(w.delay()), c, o.poke)
		}
	}
}
