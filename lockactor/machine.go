package lockactor

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/holdfast/holdfast/scripts"
)

// Config tunes a Machine. The zero value is usable: see each field's default.
type Config struct {
	// Slack is how much earlier than a validity deadline the deadline timer is
	// set: the timer wheel fires up to one tick late, so Slack is its tick.
	// Default 0.
	Slack time.Duration
	// NoTTLRetry is how long a waiter sleeps when the holder's key has no TTL
	// (someone wrote it by hand). Default 1s.
	NoTTLRetry time.Duration
	// Backoff is the first delay before repeating a failed Redis call; it
	// doubles on each failure up to MaxBackoff. Defaults 20ms and 1s.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// HandoffLimit and HandoffWindow bound local handoffs. When a hold ends
	// while another request of this client waits for the lock, the release
	// and the waiter's grant run as one script call (one round trip, nobody
	// else woken). Up to HandoffLimit handoffs in a row, within
	// HandoffWindow of the lock's last fresh grant from Redis; then the
	// release goes to Redis and this client's waiters wait for its
	// announcement like every other process's, so that a busy process
	// cannot keep a lock from the others. Defaults 100 and 10ms; a negative
	// HandoffLimit turns handoffs off.
	HandoffLimit  int
	HandoffWindow time.Duration
	// WaiterTimeout is how long a waiter's place in a queue kept by Redis
	// (the fair lock's) outlives its last keep-alive: a dead process's
	// waiters leave the queue after it. Live waiters renew their places
	// every WaiterTimeout/3. Default 5s.
	WaiterTimeout time.Duration
	// ReleaseBound is how long a Release waits for Redis to confirm it
	// before it is answered ErrReleaseUnconfirmed (the release then goes on
	// in the background): failed tries are repeated within it, so that a
	// node that comes back or a failover that is over confirms in time. The
	// runtime sets its call timeout. 0: the first failed try answers.
	ReleaseBound time.Duration
}

// DefaultWaiterTimeout is Config.WaiterTimeout's default.
const DefaultWaiterTimeout = 5 * time.Second

func (c *Config) setDefaults() {
	if c.NoTTLRetry <= 0 {
		c.NoTTLRetry = time.Second
	}
	if c.Backoff <= 0 {
		c.Backoff = 20 * time.Millisecond
	}
	if c.MaxBackoff < c.Backoff {
		c.MaxBackoff = time.Second
	}
	if c.HandoffLimit == 0 {
		c.HandoffLimit = 100
	}
	if c.HandoffWindow <= 0 {
		c.HandoffWindow = 10 * time.Millisecond
	}
	if c.WaiterTimeout <= 0 {
		c.WaiterTimeout = DefaultWaiterTimeout
	}
}

// Drift is the clock-drift allowance subtracted from a lease to get the
// validity deadline: lease/100 + 2ms, as the Redlock analysis recommends.
func Drift(lease time.Duration) time.Duration { return lease/100 + 2*time.Millisecond }

// Validity is the conservative validity deadline of a lease whose request was
// sent at sent (clock time taken before sending).
func Validity(sent time.Time, lease time.Duration) time.Time {
	return sent.Add(lease - Drift(lease))
}

type reqState uint8

const (
	statePending reqState = iota
	stateHeld
	stateReleasing
)

type request struct {
	Request
	state   reqState
	tryOnce bool
	// heard: Redis told the request to wait, so the name is in use as its
	// kind.
	heard bool
	// ambiguous: an acquire for this request may have run in Redis without
	// its reply reaching us; if the request ends, the grant must be undone.
	ambiguous bool
	// ending is set when the request must end as soon as its in-flight
	// acquire is answered; endErr is the cause it ends with.
	ending bool
	endErr error
	// releaseAsked: a Release call waits for EffReleaseDone.
	releaseAsked bool
	// granted: EffAcquired was emitted. A request that gave up while its
	// reentry was in flight holds (so that it is released) without it, and
	// is told of no deadline.
	granted bool
	owner   *owner
	// Kinds that queue waiters in Redis (Kind.KeepAlive): placed, the
	// request has a place there; placeOp, its place call is in flight;
	// keepOp, its keep-alive is; placeFailed, its last place call failed
	// and waits for the keep-alive tick to be repeated.
	placed      bool
	placeOp     uint64
	keepOp      uint64
	placeFailed bool
	// gone: a keep-alive found the place of r, the head, gone — Redis
	// granted it, most likely: it tries rather than takes a new place
	// while its client's release is on its way (see placeAll).
	gone bool
	// releaseAt is when Release was asked; unconfirmed, that the interim
	// answer ErrReleaseUnconfirmed was emitted (see Config.ReleaseBound).
	releaseAt   time.Time
	unconfirmed bool
}

type opKind uint8

const (
	opNone opKind = iota
	opAcquire
	opRelease
	opHandoff // the final release of the owner, handing the lock to a local waiter
)

// opSlot is the one Redis operation an owner has in flight (or waiting to
// be repeated): owners change their count in Redis one call at a time, so
// that each call states the count it expects.
type opSlot struct {
	kind     opKind
	id       uint64   // Op of the call in flight; 0 drops its reply
	req      *request // nil for an undo or a shutdown release
	expected int64
	sent     time.Time
	retried  bool          // the op repeats an ambiguous one
	unsure   bool          // the op's last try may or may not have run
	backoff  time.Duration // next delay if the op fails again
}

// start makes the slot carry a new op of kind for r, expecting count.
func (s *opSlot) start(kind opKind, id uint64, r *request, expected int64, now time.Time) {
	s.kind, s.id, s.req, s.expected, s.sent, s.retried, s.unsure = kind, id, r, expected, now, false, false
}

// owner is the hold of one owner field in Redis, as this machine believes it.
type owner struct {
	gen      uint64
	field    string
	mode     uint8 // the Mode of the request that first granted the hold
	count    int64 // the owner's reentry count in Redis
	token    uint64
	lease    time.Duration
	watchdog bool
	deadline time.Time
	held     []*request // requests holding the lock through this owner
	waiting  []*request // reentries and releases waiting for the op slot, in order
	// heldBuf and waitBuf back held and waiting while they hold one request
	// (the common case), so an owner's first hold and release allocate nothing.
	heldBuf, waitBuf [1]*request
	// releaseArgs keeps the arguments of the owner's release calls (see
	// callArgs), for a kind whose Release uses them.
	releaseArgs callArgs

	op        opSlot
	undoUntil time.Time // undo owners: a possible grant has expired by then
	undo      bool

	renewNext     time.Time // next renewal on the absolute grid sent + k*lease/3
	renewInFlight bool
	// renewLease is the lease the renewal in flight asked for: a reentry
	// with a longer lease may raise lease before its reply, and the
	// renewal's validity counts only what it asked Redis for.
	renewLease time.Duration
	// renewErr is the error of the last failed renewal, cleared by a
	// success: a lease that runs out says what kept the watchdog from Redis.
	renewErr error
	// yield: the owner's final release leaves local waiters behind, who let
	// other processes compete for the lock before trying again.
	yield bool
	// current: the owner is the one its field's new requests go through (a
	// newer owner of the same field, granted while this one's undo was in
	// flight, supersedes it).
	current bool
}

type subState uint8

const (
	subNone subState = iota
	subPending
	subActive
)

// Machine is the state of one lock name in one client: its holds, its local
// waiter queue, its renewals and its interest in the lock's channel. It is a
// pure state machine: it reads no clock, starts no goroutine and does no I/O.
// Step is given the time and an input, and answers with the effects the
// runtime must carry out. A Machine is not safe for concurrent use; its one
// owner is the actor that runs it.
type Machine struct {
	cfg  Config
	env  Env
	kind *Kind // the kind of every live request and owner

	// Small slices rather than maps: a lock has few requests and owners at
	// a time, and a client may hold a hundred thousand locks.
	reqs  []*request // live requests, in arrival order
	queue []*request // pending requests without a hold of their owner, FIFO
	// parked: pending requests of another kind than the machine's, which
	// arrived before Redis confirmed the machine's kind (see unpark).
	parked []*request
	owners []*owner // every owner with a hold or an op in Redis, by creation
	nextID uint64

	// The one acquire attempt in flight for the head of queue.
	att attempt
	// keepAliveArmed: the keep-alive timer of the places in a queue kept
	// by Redis (Kind.KeepAlive) is set.
	keepAliveArmed bool

	// streak counts the handoffs since the lock was last granted fresh from
	// Redis, at streakStart.
	streak      int
	streakStart time.Time

	blocked bool // the lock is held elsewhere; wait for a wake-up or the retry timer
	// unheard: a wake-up came and the head has not tried since (it may not
	// be allowed to yet): nothing may put the queue back to sleep before
	// it does.
	unheard bool
	// probe: Redis may have granted a waiter of this client (its place is
	// gone, or its client channel spoke) while this client believes it
	// holds an exclusive kind: the head tries once despite that hold, and
	// a grant shows the hold is gone (see probing).
	probe   bool
	backoff time.Duration
	// attemptErr is the error of the last failed attempt, cleared by an
	// answer: a wait that runs out says what kept it from Redis.
	attemptErr error
	sub        subState
	channel    string // the channel subscribed to, while sub != subNone
	shutdown   error

	// strays lists the place calls in flight for requests that gave up
	// (giveUp): the place each may leave is released when it is answered.
	strays []fieldCall

	// inflight lists the calls on an owner field that have not been
	// answered yet, whoever still waits for them. An owner can be lost (its
	// deadline passed) while its release is in flight; a fresh grant of the
	// same field must not be sent until that release is answered, or the
	// two could run in Redis in the other order and the old release would
	// delete the new hold.
	inflight []fieldCall

	// dropped is an owner lost in the step under way, and spare one that a
	// step left unreachable: the next owner reuses it (recycle), so that a
	// cycle of a fresh grant and its final release allocates no owner.
	// droppedReq and spareReq are the same for a request that ended.
	dropped, spare       *owner
	droppedReq, spareReq *request
	// faulted: a call of the machine was answered by a fault (a timeout, a
	// lost connection, an error). Such a call may still run later with the
	// arguments it was given, which live in its owner or request
	// (callArgs): from then on the machine reuses neither.
	faulted bool

	out []Effect
}

// fieldCall is a script call in flight on an owner field.
type fieldCall struct {
	op    uint64
	field string
}

// attempt is the fresh acquire in flight for the head of the queue.
type attempt struct {
	op   uint64
	req  *request // nil: none in flight
	sent time.Time
	woke bool // a wake-up arrived while the attempt was in flight
	// handoff: the attempt is the acquire half of a handoff.
	handoff bool
}

// New returns an empty machine for the lock name.
func New(name string, cfg Config) *Machine {
	cfg.setDefaults()
	m := &Machine{
		cfg:     cfg,
		kind:    Reentrant,
		backoff: cfg.Backoff,
	}
	m.env = Env{Name: name, Cfg: &m.cfg, keys: newLockKeys(name)}
	return m
}

// Kind returns the kind of lock the machine serves now. A runtime that
// lost the machine's state releases the fields it may have written with
// this kind's Release.
func (m *Machine) Kind() *Kind { return m.kind }

// Env returns what the kind's call builders need.
func (m *Machine) Env() Env { return m.env }

// Idle reports whether the machine holds nothing, waits for nothing and has
// nothing in flight, so that its actor may stop.
func (m *Machine) Idle() bool {
	return len(m.reqs) == 0 && len(m.owners) == 0 && m.att.req == nil && m.sub == subNone &&
		len(m.inflight) == 0 && len(m.strays) == 0
}

// Step applies one input at time now and returns the effects to carry out,
// in order. The returned slice is reused by the next call.
func (m *Machine) Step(now time.Time, msg Msg) []Effect {
	m.out = m.StepInto(m.out[:0], now, msg)
	return m.out
}

// StepInto is Step appending the effects to buf, which the machine does not
// keep: a runtime with many machines shares its buffers among them.
func (m *Machine) StepInto(buf []Effect, now time.Time, msg Msg) []Effect {
	saved := m.out
	m.out = buf
	defer func() { m.out = saved }()
	m.step(now, msg)
	m.recycle()
	return m.out
}

// recycle keeps the request and the owner the step dropped as the spares,
// once nothing of the machine reaches them: for the owner, no owner, live,
// queued or parked request or attempt names it, and no call in flight is on
// its field (a call's arguments may live in the owner, see callArgs). A
// machine whose calls have faulted keeps no spares (see faulted).
func (m *Machine) recycle() {
	r, o := m.droppedReq, m.dropped
	m.droppedReq, m.dropped = nil, nil
	if m.faulted {
		m.spareReq, m.spare = nil, nil
		return
	}
	if r != nil && !m.reaches(r) {
		*r = request{}
		m.spareReq = r
	}
	if o != nil && !o.renewInFlight && !m.fieldBusy(o.field) && !m.reachesOwner(o) {
		*o = owner{}
		m.spare = o
	}
}

// reachesOwner reports whether anything of the machine still points to the
// lost owner o: its owners, or a live, queued or parked request or the
// attempt naming it.
func (m *Machine) reachesOwner(o *owner) bool {
	if slices.Contains(m.owners, o) || m.att.req != nil && m.att.req.owner == o {
		return true
	}
	for _, rs := range [...][]*request{m.reqs, m.queue, m.parked} {
		for _, r := range rs {
			if r.owner == o {
				return true
			}
		}
	}
	return false
}

// reaches reports whether anything of the machine still points to the
// ended request r: its live, queued or parked requests, its attempt, an
// owner's holders, waiters or op.
func (m *Machine) reaches(r *request) bool {
	if m.att.req == r || slices.Contains(m.reqs, r) || slices.Contains(m.queue, r) || slices.Contains(m.parked, r) {
		return true
	}
	for _, o := range m.owners {
		if o.op.req == r || slices.Contains(o.held, r) || slices.Contains(o.waiting, r) {
			return true
		}
	}
	return false
}

func (m *Machine) step(now time.Time, msg Msg) {
	if msg.Fault == Permanent && msg.Err != nil && !errors.Is(msg.Err, ErrRedis) {
		msg.Err = fmt.Errorf("%w: %w", ErrRedis, msg.Err)
	}
	switch msg.Kind {
	case MsgEnqueue:
		m.enqueue(now, msg.Req)
	case MsgCancel:
		if r := m.req(msg.ID); r != nil {
			m.end(now, r, msg.Err)
		}
	case MsgRelease:
		m.release(now, msg.ID)
	case MsgShutdown:
		m.close(now, msg.Err)
	case MsgReply:
		m.answered(msg.Op)
		m.reply(now, msg)
	case MsgRenewReply:
		m.renewReply(now, msg)
	case MsgTimer:
		m.timer(now, msg.Timer)
	case MsgWake, MsgResync:
		if msg.Kind == MsgWake && m.kind.Place != nil && len(m.owners) > 0 {
			// A queue kept by Redis speaks on this client's channel to
			// grant one of its waiters (or to make its head look again):
			// the hold this client believes in may be gone.
			m.probe = true
		}
		m.wake(now)
	case MsgSubscribed:
		if m.sub == subPending {
			m.sub = subActive
			m.wake(now)
		}
	}
	m.unpark(now)
	m.kick(now)
}

func (m *Machine) emit(e Effect) { m.out = append(m.out, e) }

// req returns the live request id, or nil.
func (m *Machine) req(id ReqID) *request {
	for _, r := range m.reqs {
		if r.ID == id {
			return r
		}
	}
	return nil
}

// ownerOf returns the owner that field's requests go through, or nil.
func (m *Machine) ownerOf(field string) *owner {
	for i := len(m.owners) - 1; i >= 0; i-- {
		if o := m.owners[i]; o.field == field && o.current {
			return o
		}
	}
	return nil
}

// UsesField reports whether field is that of one of the machine's
// requests or owners, or of a call on it not yet answered: whether, as far
// as the machine knows, Redis may hold field through it now or later. A
// runtime keeping every field it has sent (to release them should the
// machine fail) may drop the others.
func (m *Machine) UsesField(field string) bool {
	for _, o := range m.owners {
		if o.field == field {
			return true
		}
	}
	for _, r := range m.reqs {
		if r.Field == field {
			return true
		}
	}
	for _, c := range m.inflight {
		if c.field == field {
			return true
		}
	}
	for _, c := range m.strays {
		if c.field == field {
			return true
		}
	}
	return false
}

// ownerGen returns the owner of generation gen, or nil.
func (m *Machine) ownerGen(gen uint64) *owner {
	for _, o := range m.owners {
		if o.gen == gen {
			return o
		}
	}
	return nil
}

func (m *Machine) schedule(kind TimerKind, id uint64, at time.Time) {
	m.emit(Effect{Kind: EffSchedule, Timer: TimerKey{kind, id}, At: at})
}

func (m *Machine) cancelTimer(kind TimerKind, id uint64) {
	m.emit(Effect{Kind: EffCancelTimer, Timer: TimerKey{kind, id}})
}

func (m *Machine) id() uint64 { m.nextID++; return m.nextID }

// call emits a script call answered with op; field is the owner field it
// may grant, if any.
// call emits script call op; field is the owner field it may write to
// Redis (Effect.Field) and on the owner field whose count it reads or
// changes, tracked until the call is answered (see inflight).
func (m *Machine) call(op uint64, c scripts.Call, field, on string) {
	if on != "" {
		m.inflight = append(m.inflight, fieldCall{op, on})
	}
	m.emit(Effect{Kind: EffCall, Op: op, Call: c, Field: field})
}

// answered drops call op from the calls in flight.
func (m *Machine) answered(op uint64) {
	for i, c := range m.inflight {
		if c.op == op {
			m.inflight = slices.Delete(m.inflight, i, i+1)
			return
		}
	}
}

// fieldBusy reports whether a call on field is in flight.
func (m *Machine) fieldBusy(field string) bool {
	for _, c := range m.inflight {
		if c.field == field {
			return true
		}
	}
	return false
}
