package sim

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/clientkit"
	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/scripts"
)

// ClientConfig shapes one simulated Client.
type ClientConfig struct {
	// ID is the ClientID (prefix of its owner fields). Default c1, c2, …
	ID string
	// WatchdogTimeout as in holdfast.Config. Default 3s.
	WatchdogTimeout time.Duration
	// Drift makes the client's clock run fast (> 0) or slow (< 0): after a
	// virtual second it reads 1s × (1 + Drift).
	Drift float64
	// HandoffLimit and HandoffWindow as in holdfast.Config.
	HandoffLimit  int
	HandoffWindow time.Duration
	// WaiterTimeout as in holdfast.Config. Default 5s.
	WaiterTimeout time.Duration
	// Layout as in holdfast.Config: LayoutRedisson runs the Redisson
	// layout's scripts.
	Layout holdfast.Layout
}

// engine is the World's side of one simulated holdfast Client: what its
// Locks run on. Users see only the *holdfast.Client that NewClient returns.
// Its exported methods are for holdfast's own use: package holdfast calls
// them through its interfaces (clientkit.Engine; the composites' script
// runner), which need exported names; the type itself stays unexported so
// that they are not part of sim's API.
type engine struct {
	w          *World
	id         string
	instance   string // the random part of its owner fields, by creation order here
	machineCfg lockactor.Config
	drift      float64
	// epoch is the client's clock reading at its creation, which its
	// sleeping records keep their deadlines from (lockactor.Dormant).
	epoch       time.Time
	public      *holdfast.Client
	machines    map[string]*machine
	paused      bool
	partitioned bool
	deferred    []*event
	closed      bool
	// execGen is the data generation in which the reply being delivered was
	// produced (-1 outside a reply): a grant belongs to the generation it
	// was made in, not the one its reply arrives in.
	execGen    int
	execExpiry time.Time
	execAt     time.Time
	// observers are the client's election observers (World.Observe).
	observers []*Observer
}

// machine is one lock name's state machine in one client, with what the
// runtime keeps beside it.
type machine struct {
	name       string
	m          *lockactor.Machine
	handles    map[lockactor.ReqID]lockactor.Handle
	fields     map[lockactor.ReqID]string
	timers     map[lockactor.TimerKey]uint64 // current generation of each pending timer
	subscribed bool
	channel    string // the channel subscribed to, while subscribed
	calls      int    // script calls in flight
	// dormant is the record the machine sleeps in (m is nil meanwhile), as
	// the actor runtime folds a quiet hold; dormantGen tells the current
	// arming of its timer from earlier ones.
	dormant *lockactor.Dormant
	// dormantID and dormantField are the record's request and owner field
	// (the record keeps neither).
	dormantID    lockactor.ReqID
	dormantField string
	dormantGen   uint64
}

// NewClient returns a holdfast Client whose locks run inside the World.
func (w *World) NewClient(cfg ClientConfig) *holdfast.Client {
	if cfg.ID == "" {
		cfg.ID = "c" + strconv.Itoa(len(w.clients)+1)
	}
	if cfg.WatchdogTimeout == 0 {
		cfg.WatchdogTimeout = 3 * time.Second
	}
	c := &engine{w: w, id: cfg.ID, instance: "s" + strconv.Itoa(len(w.clients)+1), drift: cfg.Drift, machines: make(map[string]*machine), execGen: -1,
		machineCfg: lockactor.Config{HandoffLimit: cfg.HandoffLimit, HandoffWindow: cfg.HandoffWindow, WaiterTimeout: cfg.WaiterTimeout,
			ReleaseBound: w.cfg.CallTimeout}}
	c.epoch = c.now()
	pub, err := clientkit.NewClient(holdfast.Config{
		Clock:           w.clock,
		WatchdogTimeout: cfg.WatchdogTimeout,
		ClientID:        cfg.ID,
		CallTimeout:     w.cfg.CallTimeout,
		HandoffLimit:    cfg.HandoffLimit,
		HandoffWindow:   cfg.HandoffWindow,
		WaiterTimeout:   cfg.WaiterTimeout,
		Layout:          cfg.Layout,
	}, c)
	if err != nil {
		panic(fmt.Sprintf("sim: NewClient: %v", err))
	}
	c.public = pub.(*holdfast.Client)
	w.clients = append(w.clients, c)
	return c.public
}

// Instance names the engine's owner fields apart from those of every other
// Client of the World, whatever their IDs: a deterministic stand-in for the
// random instance part of holdfast's owner fields, so that a run replays.
func (c *engine) Instance() string { return c.instance }

// now is the client's own clock, drift included.
func (c *engine) now() time.Time { return c.clockAt(c.w.now) }

// clockAt is the client's clock reading at World time t.
func (c *engine) clockAt(t time.Time) time.Time {
	elapsed := t.Sub(Start)
	return Start.Add(elapsed + time.Duration(float64(elapsed)*c.drift))
}

// Enqueue implements clientkit.Engine.
func (c *engine) Enqueue(name string, req lockactor.Request, h lockactor.Handle) (lockactor.Ref, error) {
	if c.closed {
		return lockactor.Ref{}, lockactor.ErrClosed
	}
	lockactor.Bind(h, lockactor.Ref{To: ref{c: c, name: name}, ID: req.ID})
	c.w.external(func() {
		c.w.at(c.w.now, c, func() {
			if c.closed {
				h.Lost(lockactor.ErrClosed)
				return
			}
			m := c.machines[name]
			if m == nil {
				m = &machine{
					name:    name,
					m:       lockactor.New(name, c.machineCfg),
					handles: make(map[lockactor.ReqID]lockactor.Handle),
					fields:  make(map[lockactor.ReqID]string),
					timers:  make(map[lockactor.TimerKey]uint64),
				}
				c.machines[name] = m
			}
			m.handles[req.ID] = h
			m.fields[req.ID] = req.Field
			lock := lockactor.Reentrant.Name
			if req.Kind != nil {
				lock = req.Kind.Name
			}
			c.w.history = append(c.w.history, Event{Kind: Enqueued, At: c.w.now, Req: uint64(req.ID), Client: c.id,
				Name: name, Field: req.Field, Lock: lock, Generation: c.w.generation})
			c.deliverTo(m, lockactor.Msg{Kind: lockactor.MsgEnqueue, Req: req})
		})
	})
	return lockactor.Ref{To: ref{c: c, name: name}, ID: req.ID}, nil
}

type ref struct {
	c    *engine
	name string
}

// Send implements lockactor.Sender: the message is delivered at the next
// Step. It may be called from any goroutine.
func (r ref) Send(id lockactor.ReqID, kind lockactor.MsgKind, err error) {
	c := r.c
	c.w.external(func() {
		c.w.at(c.w.now, c, func() {
			if m := c.machines[r.name]; m != nil && m.handles[id] != nil {
				c.w.record(Event{Kind: Releasing, At: c.w.now, Req: uint64(id),
					Client: c.id, Name: r.name, Field: m.fields[id], Generation: c.w.generation})
			}
			c.deliver(r.name, lockactor.Msg{Kind: kind, ID: id, Err: err})
		})
	})
}

// Drive implements lockactor.Driver: a blocking call of the public API
// (Wait, Release) made on the goroutine that drives the World runs the World
// until one of done is closed, ctx ends, nothing is left to happen, or an
// hour of virtual time has passed (a lock held elsewhere by a live watchdog
// would otherwise keep it running forever). A paused client whose code
// makes such a call is running again: the pause ends first (else the call
// would wait for a Resume nobody is left to make).
func (r ref) Drive(ctx context.Context, done ...<-chan struct{}) {
	w := r.c.w
	if r.c.paused {
		w.Resume(r.c.public)
	}
	limit := w.now.Add(time.Hour)
	for w.now.Before(limit) {
		for _, ch := range done {
			select {
			case <-ch:
				return
			default:
			}
		}
		if ctx.Err() != nil || !w.Step() {
			return
		}
	}
}

// names returns the names of the live machines, sorted: map order would
// make runs irreproducible.
func (c *engine) names() []string {
	names := make([]string, 0, len(c.machines))
	for name := range c.machines {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Actors implements clientkit.Engine.
func (c *engine) Actors() int { return len(c.machines) }

// Close implements clientkit.Engine: it shuts every machine down and runs
// the World until they are idle (at most a minute of virtual time: a
// cleanup release that failed waits up to the machine's longest backoff,
// a second, before it tries again), so it must be called from the goroutine
// that drives the World.
func (c *engine) Close(ctx context.Context) error {
	if c.closed {
		return nil
	}
	c.closed = true
	c.paused = false
	for _, name := range c.names() {
		c.deliver(name, lockactor.Msg{Kind: lockactor.MsgShutdown, Err: lockactor.ErrClosed})
	}
	limit := c.w.now.Add(time.Minute)
	for len(c.machines) > 0 && c.w.now.Before(limit) && c.w.Step() {
	}
	if len(c.machines) > 0 {
		return fmt.Errorf("sim: %d machines of %s not idle after Close", len(c.machines), c.id)
	}
	return nil
}

// deliver runs one message through the machine of name, if it is alive.
func (c *engine) deliver(name string, msg lockactor.Msg) {
	if m := c.machines[name]; m != nil {
		c.deliverTo(m, msg)
	}
}

// deliverTo runs one message through machine m, unless m has ended (a
// reply to a machine that went idle is dropped, as a message to a stopped
// actor is), and carries out its effects.
func (c *engine) deliverTo(m *machine, msg lockactor.Msg) {
	if c.machines[m.name] != m {
		return
	}
	name := m.name
	if m.dormant != nil {
		if msg.Kind == lockactor.MsgReply {
			panic(fmt.Sprintf("sim: a call's reply reached the sleeping machine of %s: it slept with a call in flight", name))
		}
		if msg.Kind == lockactor.MsgRenewReply {
			dl, wake := m.dormant.RenewReply(c.epoch, m.dormantID, msg)
			if !wake {
				if dl.Kind != 0 {
					c.apply(m, dl)
				}
				c.armDormant(m)
				return
			}
		}
		c.wake(m)
	}
	if msg.Kind == lockactor.MsgTimer {
		delete(m.timers, msg.Timer)
	}
	now := c.now()
	for _, e := range m.m.Step(now, msg) {
		c.apply(m, e)
	}
	if m.m.Idle() {
		delete(c.machines, name)
		return
	}
	c.maybeSleep(m)
}

// maybeSleep folds a quiet machine into its record, as the actor runtime
// does after its idle linger: here at once, on a coin toss of the World's
// seeded source, so that runs explore holds kept both ways.
func (c *engine) maybeSleep(m *machine) {
	if m.calls > 0 || m.subscribed || c.closed {
		return
	}
	rec, id, field, ok := m.m.Sleep(c.epoch)
	if !ok || c.w.rng.Intn(2) == 0 {
		return
	}
	m.m, m.dormant, m.dormantID, m.dormantField = nil, &rec, id, field
	clear(m.timers) // the record's timer replaces them
	c.armDormant(m)
}

// armDormant sets the sleeping record's timer for its Due time.
func (c *engine) armDormant(m *machine) {
	c.w.seq++
	gen := c.w.seq
	m.dormantGen = gen
	c.w.at(c.worldTime(m.dormant.Due(c.epoch, c.machineCfg.Slack)), c, func() {
		if c.machines[m.name] != m || m.dormant == nil || m.dormantGen != gen {
			return
		}
		renew, wake := m.dormant.Fire(c.epoch, c.now(), m.name, m.dormantField, c.machineCfg.Slack)
		if wake.Kind != 0 {
			c.deliverTo(m, wake)
			return
		}
		c.armDormant(m)
		if renew.Kind != 0 {
			c.apply(m, renew)
		}
	})
}

// wake rebuilds the machine from its record.
func (c *engine) wake(m *machine) {
	mm, effs := lockactor.Wake(m.name, c.machineCfg, c.epoch, m.dormant, m.dormantID, m.dormantField, nil)
	m.m, m.dormant, m.dormantID, m.dormantField = mm, nil, 0, ""
	for _, e := range effs {
		c.apply(m, e)
	}
}

func (c *engine) apply(m *machine, e lockactor.Effect) {
	w := c.w
	name := m.name
	switch e.Kind {
	case lockactor.EffCall:
		op := e.Op
		m.calls++
		w.send(c, e.Call.Script.Src, e.Call.Keys, e.Call.Args, func(r Reply, f lockactor.Fault) {
			m.calls--
			msg := lockactor.Msg{Kind: lockactor.MsgReply, Op: op, Fault: f, Err: r.errOrNil()}
			if f == lockactor.NoFault {
				vals, err := ints(r)
				if err != nil {
					msg.Fault, msg.Err = lockactor.Transient, err
				}
				msg.Reply = vals
			}
			if msg.Fault != lockactor.NoFault {
				w.history = append(w.history, Event{Kind: CallFailed, At: w.now, Client: c.id, Name: name,
					Err: msg.Err, Generation: w.generation})
			}
			c.deliverTo(m, msg)
		})
	case lockactor.EffRenew:
		// Renewals are not batched here: one call per renewal keeps the
		// simulated schedule simple, and batching changes no outcome.
		op, sent := e.Op, c.now()
		w.sendWatching(c, e.Script.Src, []string{e.Key}, []string{e.Field, scripts.Millis(e.Lease)}, e.Script.RenewedKey(name, e.Field),
			func(r Reply, f lockactor.Fault) {
				renewed := f == lockactor.NoFault && len(r.Array) == 1 && r.Array[0].Int == 1
				if f != lockactor.NoFault {
					// A keep-alive (or renewal) that got no answer may
					// still have run, as a failed place call may.
					w.history = append(w.history, Event{Kind: CallFailed, At: w.now, Client: c.id, Name: name,
						Field: e.Field, Err: r.errOrNil(), Generation: w.generation})
				}
				if renewed {
					w.history = append(w.history, Event{Kind: Extended, At: w.now, Client: c.id, Name: name,
						Field: e.Field, ExpiresAt: c.execExpiry, RanAt: c.execAt, Generation: c.generation()})
				}
				c.deliverTo(m, lockactor.Msg{Kind: lockactor.MsgRenewReply, Op: op, Sent: sent, Renewed: renewed, Fault: f, Err: r.errOrNil()})
			})
	case lockactor.EffSchedule:
		w.seq++
		gen := w.seq
		m.timers[e.Timer] = gen
		key := e.Timer
		w.at(c.worldTime(e.At), c, func() {
			if m.timers[key] == gen {
				c.deliverTo(m, lockactor.Msg{Kind: lockactor.MsgTimer, Timer: key})
			}
		})
	case lockactor.EffCancelTimer:
		delete(m.timers, e.Timer)
	case lockactor.EffSubscribe:
		m.subscribed, m.channel = true, e.Channel
		if !c.partitioned {
			w.at(w.now.Add(2*w.delay()), c, func() {
				if m.subscribed {
					c.deliverTo(m, lockactor.Msg{Kind: lockactor.MsgSubscribed})
				}
			})
		}
	case lockactor.EffUnsubscribe:
		m.subscribed = false
	case lockactor.EffAcquired:
		w.record(Event{Kind: Acquired, At: w.now, Req: uint64(e.ID), Client: c.id, Name: name,
			Field: m.fields[e.ID], Token: e.Token, Deadline: e.At, DeadlineAt: c.worldTime(e.At), ExpiresAt: c.execExpiry,
			GrantedAt: c.execAt, RanAt: c.execAt, Generation: c.generation()})
		if h := m.handles[e.ID]; h != nil {
			h.Acquired(e.Token, e.At)
		}
	case lockactor.EffDeadline:
		w.record(Event{Kind: Renewed, At: w.now, Req: uint64(e.ID), Client: c.id, Name: name,
			Field: m.fields[e.ID], Deadline: e.At, DeadlineAt: c.worldTime(e.At), ExpiresAt: c.execExpiry,
			RanAt: c.execAt, Generation: c.generation()})
		if h := m.handles[e.ID]; h != nil {
			h.SetDeadline(e.At)
		}
	case lockactor.EffReleaseDone:
		if h := m.handles[e.ID]; h != nil {
			h.ReleaseDone(e.Err)
		}
	case lockactor.EffLost:
		w.record(Event{Kind: Lost, At: w.now, Req: uint64(e.ID), Client: c.id, Name: name,
			Field: m.fields[e.ID], Err: e.Err, RanAt: c.execAt, Generation: w.generation})
		if h := m.handles[e.ID]; h != nil {
			delete(m.handles, e.ID)
			delete(m.fields, e.ID)
			h.Lost(e.Err)
		}
	}
}

func (c *engine) generation() int {
	if c.execGen >= 0 {
		return c.execGen
	}
	return c.w.generation
}

// worldTime converts a time on the client's clock to the first World time
// at which the client's clock reads at least t.
func (c *engine) worldTime(t time.Time) time.Time {
	elapsed := t.Sub(Start)
	wt := Start.Add(time.Duration(float64(elapsed) / (1 + c.drift)))
	for c.clockAt(wt).Before(t) {
		wt = wt.Add(time.Microsecond)
	}
	return wt
}

func (r Reply) errOrNil() error {
	if r.IsError() {
		return r.Err()
	}
	return nil
}

// ints turns an integer or integer-array reply into a slice, as
// actor.Rueidis does.
func ints(r Reply) ([]int64, error) {
	switch r.Kind {
	case ReplyInt:
		return []int64{r.Int}, nil
	case ReplyArray:
		vals := make([]int64, len(r.Array))
		for i, x := range r.Array {
			if x.Kind != ReplyInt {
				return nil, fmt.Errorf("sim: script reply %v is not an integer array", r)
			}
			vals[i] = x.Int
		}
		return vals, nil
	}
	return nil, fmt.Errorf("sim: script reply %v is not an integer or an array", r)
}

// subscriber returns the machine subscribed to channel, and its name.
func (c *engine) subscriber(channel string) (*machine, string) {
	for name, m := range c.machines {
		if m.subscribed && m.channel == channel {
			return m, name
		}
	}
	return nil, ""
}
