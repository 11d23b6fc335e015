// Package sim tests your lock-using code against holdfast's real lock logic
// in a deterministic world: virtual time, simulated Redis nodes, a faulty
// network. A minute of lock life with failovers and pauses runs in
// milliseconds, and a run is reproduced from its seed. It is a supported
// part of holdfast's public API, under the same compatibility promise as
// package holdfast (docs/compatibility.md):
//
//	w := sim.New(sim.Config{Seed: 7})     // a simulated Redis, virtual time
//	a := w.NewClient(sim.ClientConfig{})  // real *holdfast.Client values
//	b := w.NewClient(sim.ClientConfig{})
//	first := a.Lock(ctx, "job")
//	first.Wait(ctx)                       // blocking calls drive the World
//	w.Pause(a)                            // a GC pause: a's lease runs out
//	second := b.Lock(ctx, "job", holdfast.WithWait(10*time.Second))
//	second.Wait(ctx)                      // granted, Token 2 beside first's 1
//	w.Resume(a)                           // a wakes believing it holds "job"...
//	w.Advance(time.Millisecond)           // ...and first.Lost closes: ErrLeaseExpired
//	err := w.Close()
//
// Inside rapid, w.Chaos(t) draws one fault per step and w.Settle() ends them
// all, so that a test can check its invariants under every fault and its
// liveness afterwards (Example_jobRunnerUnderPause and
// TestJobRunnersUnderChaos in this package's tests stand alone; see
// docs/simulation.md).
//
// A World holds virtual time, simulated Redis nodes that run the production
// Lua scripts (a primary with asynchronously replicated replicas, failover
// that loses the unreplicated tail, restart without persistence), a network
// between clients and nodes that delays, reorders, drops and partitions, and
// Clients — real *holdfast.Client values with the public API of production —
// whose lock machines (package lockactor, the same as production) run on a
// scheduler inside the World.
//
// Nothing happens by itself: every message, timer and network delivery is
// processed inside World.Step, World.Advance or World.RunUntilIdle (and the
// blocking calls of the public API, which run them), on the caller's
// goroutine, in an order drawn from the World's seed. The same seed and the
// same calls give the same run, event for event.
//
// # Testing your own code
//
// Create a World, make Clients with NewClient, run your lock-using code
// against them (Lock returns at once; select on Acquired and Lost after
// advancing the World), inject faults (Failover, Partition, Pause,
// RestartPrimary, DropPubSub, Steal) and check your invariants, with
// History for what happened when. Several Deployments in one World
// (NewDeployment) test RedLock and LockAll. Node and Reply are the simulated
// Redis server itself, for inspection (Node.Do) and faults of your own.
package sim

import (
	"container/heap"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/scripts"
)

// Config shapes a World. Zero values get the defaults named.
type Config struct {
	Seed int64
	// Replicas behind the primary. Default 0: a single node.
	Replicas int
	// ReplicationLag is the most a write waits before a replica applies it.
	// Default 5ms.
	ReplicationLag time.Duration
	// MinDelay and MaxDelay bound each one-way network delay. Defaults
	// 100µs and 2ms.
	MinDelay, MaxDelay time.Duration
	// DropRate is the chance a request or reply is lost. Default 0.
	DropRate float64
	// CallTimeout is when a client gives up waiting for a reply (the
	// outcome is then ambiguous). Default 200ms.
	CallTimeout time.Duration
}

// Start is the virtual time at which every World begins.
var Start = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// World is one simulated deployment. It is not safe for concurrent use.
type World struct {
	cfg     Config
	rng     *rand.Rand
	now     time.Time
	seq     uint64
	events  eventQueue
	nodes   []*node
	primary int
	clients []*engine
	clock   *worldClock
	calls   map[uint64]*call
	history []Event
	tokens  map[holdRef]uint64 // the token of each Lock held now
	// closed: Close was called; Chaos and Settle refuse to run.
	closed bool
	// disruptions lists the roll-backs and key thefts, for checkers.
	disruptions []Disruption
	// generation counts data roll-backs (failover with loss, restart): fencing
	// tokens are only promised to increase within one generation.
	generation int
	dropPubSub float64
	// epoch changes with every failover and restart: replication in flight
	// from an earlier epoch is dropped.
	epoch int

	// inbox holds calls of the public API made from other goroutines
	// (context cancellations run on their own goroutine); Step takes them
	// in order before anything else.
	inboxMu sync.Mutex
	inbox   []func()

	// bound maps the clients of extra deployments to them (deployments.go).
	bound map[*engine]*Deployment
}

// external queues fn, from any goroutine, to run at the next Step.
func (w *World) external(fn func()) {
	w.inboxMu.Lock()
	w.inbox = append(w.inbox, fn)
	w.inboxMu.Unlock()
}

// Inbox reports how many calls from other goroutines wait for the next Step.
func (w *World) Inbox() int {
	w.inboxMu.Lock()
	defer w.inboxMu.Unlock()
	return len(w.inbox)
}

func (w *World) drainInbox() {
	w.inboxMu.Lock()
	in := w.inbox
	w.inbox = nil
	w.inboxMu.Unlock()
	for _, fn := range in {
		fn()
	}
}

type node struct {
	*Node
	id      int
	up      bool
	applied int // replicas: how much of the primary's log they applied
}

// New returns a World with the primary and replicas up.
func New(cfg Config) *World {
	if cfg.ReplicationLag <= 0 {
		cfg.ReplicationLag = 5 * time.Millisecond
	}
	if cfg.MinDelay <= 0 {
		cfg.MinDelay = 100 * time.Microsecond
	}
	if cfg.MaxDelay < cfg.MinDelay {
		cfg.MaxDelay = max(cfg.MinDelay, 2*time.Millisecond)
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 200 * time.Millisecond
	}
	w := &World{cfg: cfg, rng: rand.New(rand.NewSource(cfg.Seed)), now: Start, calls: make(map[uint64]*call),
		tokens: make(map[holdRef]uint64)}
	w.clock = newWorldClock(Start)
	for i := 0; i <= cfg.Replicas; i++ {
		n := &node{Node: NewNode(w.Now), id: i, up: true}
		n.OnPublish = w.publish
		w.nodes = append(w.nodes, n)
	}
	return w
}

// Now returns the World's virtual time.
func (w *World) Now() time.Time { return w.now }

// Clock returns a clock.Clock that follows the World's time, for code under
// test that wants one. Its Now moves with every event; its timers, tickers
// and sleeps fire at the end of each Advance (and of Settle).
func (w *World) Clock() clock.Clock { return w.clock }

// Primary returns the node that clients write to now.
func (w *World) Primary() *Node { return w.nodes[w.primary].Node }

// Generation counts the data roll-backs so far (failovers that lost writes,
// restarts without persistence).
func (w *World) Generation() int { return w.generation }

// --- events ---

type event struct {
	at  time.Time
	seq uint64
	fn  func()
	// client is the client the event belongs to (nil for node events); a
	// paused client's events wait until it resumes.
	client *engine
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

func (w *World) at(t time.Time, c *engine, fn func()) {
	w.seq++
	heap.Push(&w.events, &event{at: t, seq: w.seq, fn: fn, client: c})
}

func (w *World) delay() time.Duration {
	span := int64(w.cfg.MaxDelay - w.cfg.MinDelay)
	if span <= 0 {
		return w.cfg.MinDelay
	}
	return w.cfg.MinDelay + time.Duration(w.rng.Int63n(span+1))
}

// never is the bound of a Step: it runs the next event whenever it is due.
var never = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// runNext is the World's one event loop body: it runs the next event due
// by end, in (time, sequence) order, and reports whether it ran one. Events
// of a paused client met on the way are set aside for Resume. Time moves to
// the event's time; it never passes end and never runs backwards, so no
// event runs later than the Advance or RunUntilIdle that runs it allows.
func (w *World) runNext(end time.Time) bool {
	w.drainInbox()
	for w.events.Len() > 0 {
		head := w.events[0]
		if head.at.After(end) {
			return false
		}
		heap.Pop(&w.events)
		if head.client != nil && head.client.paused {
			head.client.deferred = append(head.client.deferred, head)
			continue
		}
		if head.at.After(w.now) {
			w.setNow(head.at)
		}
		head.fn()
		return true
	}
	return false
}

// setNow moves virtual time to t. Time that ran backwards would make every
// check ordered by it lie (a grant would appear to run after the fault that
// followed it), so it panics rather than go on.
func (w *World) setNow(t time.Time) {
	if t.Before(w.now) {
		panic(fmt.Sprintf("sim: virtual time would run backwards, from %v to %v", w.now.Sub(Start), t.Sub(Start)))
	}
	w.now = t
	w.clock.set(t)
}

// Step processes the next event, moving time to it. It reports false when
// no event is queued (events of paused clients wait for Resume).
func (w *World) Step() bool { return w.runNext(never) }

// Advance processes every event due within d, in order, and moves time
// forward by d. A negative d panics: time does not run backwards.
func (w *World) Advance(d time.Duration) {
	if d < 0 {
		panic(fmt.Sprintf("sim: Advance(%v): time does not run backwards", d))
	}
	end := w.now.Add(d)
	for w.runNext(end) {
	}
	w.setNow(end)
	w.clock.sync()
}

// RunUntilIdle processes every event due now, including the ones they queue
// for now, without moving time.
func (w *World) RunUntilIdle() {
	for w.runNext(w.now) {
	}
}

// Pending reports the events queued.
func (w *World) Pending() int { return w.events.Len() }

// --- the network between clients and the primary ---

type call struct {
	done  bool
	reply func(Reply, lockactor.Fault)
}

// send carries a script call from c to the primary and its reply back,
// through the network, with the client's call timeout.
func (w *World) send(c *engine, src string, keys, args []string, reply func(Reply, lockactor.Fault)) {
	w.sendWatching(c, src, keys, args, keys[0], reply)
}

// sendWatching is send, with the reply's execExpiry read from key: the key
// whose TTL bounds the hold the call serves.
func (w *World) sendWatching(c *engine, src string, keys, args []string, key string, reply func(Reply, lockactor.Fault)) {
	w.seq++
	id := w.seq
	cl := &call{reply: reply}
	w.calls[id] = cl
	finish := func(r Reply, f lockactor.Fault) {
		if cl.done {
			return
		}
		cl.done = true
		delete(w.calls, id)
		cl.reply(r, f)
	}
	w.at(w.now.Add(w.cfg.CallTimeout), c, func() {
		finish(errReply("ERR timeout"), lockactor.Ambiguous)
	})
	if c.partitioned || w.lose() {
		return
	}
	w.at(w.now.Add(w.delay()), nil, func() {
		n, gen, replicate := w.route(c)
		if !n.up || c.partitioned {
			return
		}
		r := n.Eval(src, keys, args)
		expires, ranAt := n.expiry(key), w.now
		replicate()
		if c.partitioned || w.lose() {
			return
		}
		w.at(w.now.Add(w.delay()), c, func() {
			if ranAt.After(w.now) {
				panic(fmt.Sprintf("sim: a reply arrived at %v from a script run later, at %v", w.now.Sub(Start), ranAt.Sub(Start)))
			}
			fault := lockactor.NoFault
			if r.IsError() {
				fault = lockactor.Transient
				if len(r.Str) >= 9 && r.Str[:9] == "WRONGTYPE" {
					fault = lockactor.Permanent
				}
			}
			c.execGen, c.execExpiry, c.execAt = gen, expires, ranAt
			finish(r, fault)
			c.execGen, c.execExpiry, c.execAt = -1, time.Time{}, time.Time{}
		})
	})
}

func (w *World) lose() bool { return w.cfg.DropRate > 0 && w.rng.Float64() < w.cfg.DropRate }

// replicate schedules each replica to apply the primary's log as it is now.
func (w *World) replicate() {
	p := w.nodes[w.primary]
	upto, epoch := len(p.Log()), w.epoch
	for i, n := range w.nodes {
		if i == w.primary || !n.up {
			continue
		}
		n := n
		lag := time.Duration(w.rng.Int63n(int64(w.cfg.ReplicationLag) + 1))
		w.at(w.now.Add(lag), nil, func() {
			if !n.up || w.epoch != epoch {
				return
			}
			for ; n.applied < upto; n.applied++ {
				n.Apply(p.Log()[n.applied])
			}
		})
	}
}

// publish routes a PUBLISH of the primary to the subscribed clients.
func (w *World) publish(channel, _ string) int64 {
	name, ok := scripts.NameOfChannel(channel)
	var n int64
	for _, c := range w.clients {
		m := c.machines[name]
		if !ok {
			// Another layout's channel (Redisson's): find the machine
			// subscribed to it.
			m, name = c.subscriber(channel)
		}
		if m == nil || !m.subscribed || m.channel != channel || c.partitioned {
			continue
		}
		n++
		if w.dropPubSub > 0 && w.rng.Float64() < w.dropPubSub {
			continue
		}
		c := c
		w.at(w.now.Add(w.delay()), c, func() { c.deliver(name, lockactor.Msg{Kind: lockactor.MsgWake}) })
	}
	if ok {
		n += w.publishToObservers(name)
	}
	return n
}

// --- history ---

// EventKind tells what happened to a Lock.
type EventKind uint8

// Kinds of Event.
const (
	Acquired  EventKind = iota + 1
	Renewed             // the watchdog moved the deadline
	Releasing           // the holder gave the lock up (Release, or its context ended)
	Lost
	Enqueued // the Lock call reached its client's machine
	// CallFailed: a script call of the client on the name got no answer
	// (lost, timed out) or an error; what it carried may not have reached
	// Redis. Req is 0: a call may serve several requests. Field is set for
	// a failed renewal or keep-alive (one field's call).
	CallFailed
	// Extended: a renewal found Field holding Name in Redis and left the
	// key to expire at ExpiresAt (its script ran at RanAt, in Generation).
	// Req is 0: a renewal serves an owner field, not one Lock, and may land
	// while none of the field's Locks is held — a reentry answered after it
	// is then told a deadline this renewal bought.
	Extended
)

// Event is one entry of the World's history: a grant or the end of a Lock.
type Event struct {
	Kind     EventKind
	At       time.Time // World time
	Req      uint64    // the Lock call (unique within its client)
	Client   string
	Name     string
	Field    string
	Token    uint64    // the hold's fencing token (Acquired and Renewed)
	Deadline time.Time // the holder's validity deadline, on its own clock
	// DeadlineAt is Deadline in World time (they differ for a drifting clock).
	DeadlineAt time.Time
	// GrantedAt is when the script that made this grant ran in Redis:
	// replies race, so grants are ordered by it, not by At.
	GrantedAt time.Time
	// RanAt is when the script whose reply brought this event ran in Redis
	// (zero when no reply did, as for a Lost at a deadline).
	RanAt time.Time
	// ExpiresAt is when Redis would expire the lock key, as the call whose
	// reply made this grant or renewal left it (zero when unknown).
	ExpiresAt time.Time
	Err       error
	// Lock is the kind of lock an Enqueued request asks for: "lock"
	// (Client.Lock), "fair" (FairLock), "rw" (ReadLock, WriteLock) or
	// "semaphore" (Semaphore).
	Lock string
	// Generation is the data generation the script whose reply brought this
	// event ran in (the World's generation when no reply did): a reply
	// delivered after a roll-back still belongs to the data it was made from.
	Generation int
}

// holdRef names one Lock call of one client.
type holdRef struct {
	client string
	req    uint64
}

// record appends e to the history. Renewals carry the token of the hold
// they extend (the machine's deadline effect does not), so that a checker
// can tell a renewal of an old hold from a fresh grant.
func (w *World) record(e Event) {
	ref := holdRef{e.Client, e.Req}
	switch e.Kind {
	case Acquired:
		w.tokens[ref] = e.Token
	case Renewed:
		e.Token = w.tokens[ref]
	case Lost:
		delete(w.tokens, ref)
	}
	w.history = append(w.history, e)
}

// History returns every grant and end of a Lock so far, in order.
func (w *World) History() []Event { return w.history }

func (w *World) client(c *holdfast.Client) *engine {
	for _, sc := range w.clients {
		if sc.public == c {
			return sc
		}
	}
	panic("sim: not a client of this World")
}

// Clients returns the World's clients' ids, in creation order.
func (w *World) Clients() []string {
	ids := make([]string, len(w.clients))
	for i, c := range w.clients {
		ids[i] = c.id
	}
	return ids
}

// Machines reports the lock machines alive in all clients.
func (w *World) Machines() int {
	n := 0
	for _, c := range w.clients {
		n += len(c.machines)
	}
	return n
}

// Keys returns the lock hashes present on the primary, sorted (not fence
// counters — holdfast's or Redisson's — nor waiter marks, which lapse by
// themselves).
func (w *World) Keys() []string {
	var out []string
	for _, r := range w.Primary().Do("KEYS", "*").Array {
		if !strings.HasSuffix(r.Str, ":fence") && !strings.HasSuffix(r.Str, ":w") &&
			!strings.HasPrefix(r.Str, "redisson_lock_token:") {
			out = append(out, r.Str)
		}
	}
	sort.Strings(out)
	return out
}
