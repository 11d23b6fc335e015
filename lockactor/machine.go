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
	return m.out
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

// --- requests ---

func (m *Machine) enqueue(now time.Time, req Request) {
	r := &request{Request: req, tryOnce: req.Wait == 0}
	m.reqs = append(m.reqs, r)
	if m.shutdown != nil {
		m.finish(r, m.shutdown)
		return
	}
	if req.Wait > 0 {
		m.schedule(TimerWait, uint64(req.ID), now.Add(req.Wait))
	}
	if k := kindOf(&req); k != m.kind {
		if len(m.reqs) > 1 || len(m.owners) > 0 || m.att.req != nil {
			if m.kindKnown() {
				// In use as another kind, which Redis refuses too.
				m.finish(r, ErrWrongKind)
				return
			}
			// Busy as another kind that Redis has not confirmed yet: the
			// name may well be r's kind (the other requests' answer will
			// tell). r waits aside until then (see unpark); a try-once
			// request cannot try now, and ends as behind an attempt in
			// flight.
			if r.tryOnce {
				m.finish(r, ErrWaitTimeout)
				return
			}
			m.parked = append(m.parked, r)
			return
		}
		m.kind = k
	}
	m.admit(now, r)
}

// admit queues request r of the machine's kind: as a reentry of its owner's
// hold, at the front (Kind.Jump) or at the back of the local queue.
func (m *Machine) admit(now time.Time, r *request) {
	if o := m.ownerOf(r.Field); o != nil && !o.undo {
		if r.tryOnce && (o.op.kind != opNone || len(o.waiting) > 0) {
			// A try-once reentry behind its owner's call in flight (whose
			// retries the owner may wait for) cannot try now: it ends, as
			// a fresh one behind an attempt in flight does.
			m.finish(r, ErrWaitTimeout)
			return
		}
		o.waiting = append(o.waiting, r)
		m.nextOp(now, o)
		return
	}
	if m.kind.Jump != nil && m.kind.Jump(&r.Request, m.holds) {
		m.queue = append([]*request{r}, m.queue...)
		m.wake(now)
		return
	}
	m.queue = append(m.queue, r)
}

// kindKnown reports whether Redis has confirmed that the name is in use as
// the machine's kind: this client holds it, or a request of the kind was
// told to wait (a name in use as another kind refuses instead).
func (m *Machine) kindKnown() bool {
	if len(m.owners) > 0 {
		return true
	}
	for _, r := range m.queue {
		if r.heard {
			return true
		}
	}
	return false
}

// unpark decides the requests parked behind requests of another kind: once
// Redis confirmed that kind they end with ErrWrongKind, as Redis would
// refuse them; once every request of that kind is over without it (refused
// as the wrong kind, cancelled…), the first parked request's kind becomes
// the machine's, and the parked requests of that kind are queued.
func (m *Machine) unpark(now time.Time) {
	if len(m.parked) == 0 {
		return
	}
	if m.kindKnown() {
		for _, r := range slices.Clone(m.parked) {
			m.finish(r, ErrWrongKind)
		}
		return
	}
	if len(m.reqs) > len(m.parked) || len(m.owners) > 0 || m.att.req != nil {
		return
	}
	m.kind = kindOf(&m.parked[0].Request)
	keep := m.parked[:0]
	var admit []*request
	for _, r := range m.parked {
		if kindOf(&r.Request) == m.kind {
			admit = append(admit, r)
		} else {
			keep = append(keep, r)
		}
	}
	m.parked = keep
	for _, r := range admit {
		m.admit(now, r)
	}
}

// end makes request r give up (pending) or release (held) and end with err.
func (m *Machine) end(now time.Time, r *request, err error) {
	switch r.state {
	case statePending:
		if o := m.ownerOf(r.Field); r == m.att.req || r.placeOp != 0 || (o != nil && o.op.req == r) {
			// The outcome of its acquire is in flight; decide when it lands.
			r.ending, r.endErr = true, err
			return
		}
		m.removeWaiting(r)
		if r.ambiguous && r.owner == nil {
			m.undoFor(now, r, now.Add(r.Lease))
		}
		m.finish(r, err)
	case stateHeld:
		r.endErr = err
		m.askRelease(now, r)
	case stateReleasing:
		// Already on its way out; the first cause stands.
	}
}

// giveUp ends pending request r with err at once, even while an acquire of
// its is in flight: the wait budget bounds the whole attempt, not just the
// part before a call that may take CallTimeout to fail. The call is settled
// in the background when its reply lands, as for any request that gave up
// with its acquire in flight (r.ending): a grant it made is undone.
func (m *Machine) giveUp(now time.Time, r *request, err error) {
	m.end(now, r, err)
	if r.ending {
		if r.placeOp != 0 && r != m.att.req {
			m.strays = append(m.strays, fieldCall{r.placeOp, r.Field})
		}
		m.removeWaiting(r)
		m.finish(r, err)
	}
}

func (m *Machine) release(now time.Time, id ReqID) {
	r := m.req(id)
	if r == nil {
		m.emit(Effect{Kind: EffReleaseDone, ID: id, Err: ErrNotHeld})
		return
	}
	r.releaseAsked = true
	switch r.state {
	case statePending:
		m.end(now, r, ErrReleased)
	case stateHeld:
		r.endErr = ErrReleased
		m.askRelease(now, r)
	case stateReleasing:
	}
}

// finish ends request r with cause err: answers a waiting Release (nil for
// a pending request, which a Release always cancels; err otherwise, unless
// the cause is the release itself), then closes Lost.
func (m *Machine) finish(r *request, err error) {
	i := slices.Index(m.reqs, r)
	if i < 0 {
		return
	}
	m.reqs = slices.Delete(m.reqs, i, i+1)
	if j := slices.Index(m.parked, r); j >= 0 {
		m.parked = slices.Delete(m.parked, j, j+1)
	}
	if r.Wait > 0 {
		m.cancelTimer(TimerWait, uint64(r.ID))
	}
	m.unqueue(r)
	if r.releaseAsked {
		var rerr error
		if r.state != statePending && err != ErrReleased {
			rerr = err
		}
		m.answerRelease(r, rerr)
	}
	m.emit(Effect{Kind: EffLost, ID: r.ID, Err: err})
}

func (m *Machine) answerRelease(r *request, err error) {
	if r.releaseAsked {
		r.releaseAsked = false
		m.emit(Effect{Kind: EffReleaseDone, ID: r.ID, Err: err})
	}
}

func (m *Machine) removeWaiting(r *request) {
	for i, q := range m.queue {
		if q == r {
			if m.queues(r) {
				// A place in Redis belongs to the owner field: a later
				// request of the same field keeps it (undoFor), so it takes
				// r's turn here too, and the local order stays the order of
				// the places (the head is the one that confirms a grant).
				for j := i + 1; j < len(m.queue); j++ {
					if s := m.queue[j]; s.Field == r.Field && s.state == statePending && !s.ending {
						copy(m.queue[i+1:j+1], m.queue[i:j])
						m.queue[i] = s
						m.queue = append(m.queue[:i+1], m.queue[i+2:]...)
						return
					}
				}
			}
			m.queue = append(m.queue[:i], m.queue[i+1:]...)
			return
		}
	}
	for _, o := range m.owners {
		for i, q := range o.waiting {
			if q == r {
				o.waiting = append(o.waiting[:i], o.waiting[i+1:]...)
				return
			}
		}
	}
}

// --- fresh acquisition: the head of the queue ---

// kick starts an acquire attempt for the head of the queue when nothing stops
// it, gives the other waiters their places in Redis (kinds that queue
// there), and keeps the channel subscription in step with the queue.
func (m *Machine) kick(now time.Time) {
	m.tryHead(now)
	m.placeAll(now)
}

func (m *Machine) tryHead(now time.Time) {
	if len(m.queue) == 0 {
		if m.att.req == nil {
			m.unsubscribe()
			if m.blocked {
				m.blocked = false
				m.cancelTimer(TimerRetry, 0)
			}
		}
		return
	}
	if m.att.req != nil {
		m.failTryOnceBehind()
		return
	}
	r := m.queue[0]
	// A head whose place call is in flight waits for it: a request has one
	// call in flight at a time.
	if m.blocked || r.placeOp != 0 || !m.mayAttempt(r) {
		// Held here or elsewhere: a try-once request cannot be granted now.
		m.failTryOnce(true)
		return
	}
	if r.placed && m.kind.Place != nil && !m.unheard {
		// A head with a place waits for its grant's message, its retry
		// timer or a keep-alive that finds its place gone: nothing else
		// (this client's own release, the head before it leaving) can
		// have given it the lock, and trying would only find it queued.
		m.blockFor(now, m.cfg.WaiterTimeout/3)
		return
	}
	m.att = attempt{op: m.id(), req: r, sent: now}
	m.unheard = false
	env := m.env
	if m.kind.Place != nil {
		env.Behind = m.behind(r)
	}
	m.call(m.att.op, m.kind.Acquire(env, &r.Request, 0), r.Field, r.Field)
	m.failTryOnceBehind()
}

// failTryOnceBehind ends the try-once requests queued behind the attempt in
// flight when the kind is exclusive (no MayAttempt): none of them could be
// granted beside it. A kind that lets local requests hold together (readers)
// lets them wait for their own turn to try.
func (m *Machine) failTryOnceBehind() {
	if m.kind.MayAttempt == nil {
		m.failTryOnce(false)
	}
}

// mayAttempt applies the kind's policy to the head request r. Whatever the
// kind, r waits while an owner of its own field has an op in Redis (an undo
// of a grant that may have happened, or a lost owner's release not yet
// answered): a fresh attempt could cross it.
func (m *Machine) mayAttempt(r *request) bool {
	for _, o := range m.owners {
		if o.field == r.Field {
			return false
		}
	}
	if m.fieldBusy(r.Field) {
		// A call of a lost owner of this field is still on its way.
		return false
	}
	if m.kind.MayAttempt == nil {
		return len(m.owners) == 0
	}
	return m.kind.MayAttempt(&r.Request, m.holds)
}

// holds yields this client's holds on the name, for Kind.MayAttempt.
func (m *Machine) holds(yield func(Hold) bool) {
	for _, o := range m.owners {
		if !yield(Hold{Field: o.field, Mode: o.mode, Count: o.count}) {
			return
		}
	}
}

// failTryOnce ends the try-once requests that would have to wait: all of them
// when all, else those behind the one with an attempt in flight.
func (m *Machine) failTryOnce(all bool) {
	keep := m.queue[:0]
	var failed []*request
	for _, r := range m.queue {
		if r.tryOnce && (all || r != m.att.req) && !r.ambiguous {
			failed = append(failed, r)
			continue
		}
		keep = append(keep, r)
	}
	for i := len(keep); i < len(m.queue); i++ {
		m.queue[i] = nil
	}
	m.queue = keep
	for _, r := range failed {
		m.finish(r, ErrWaitTimeout)
	}
}

// reply routes the reply of a script call to the op that made it, decoding
// it with the kind's decoder for that op. A reply that does not decode
// counts as a transient failure.
func (m *Machine) reply(now time.Time, msg Msg) {
	var unsynced error
	if msg.Fault == Unsynced {
		unsynced, msg.Fault, msg.Err = msg.Err, NoFault, nil
	}
	for _, o := range m.owners {
		if o.op.id != msg.Op || o.op.kind == opNone {
			continue
		}
		switch o.op.kind {
		case opAcquire:
			var res AcquireResult
			res, msg.Fault, msg.Err = decode(m.kind.DecodeAcquire, msg)
			m.reentryReply(now, o, msg, res)
		case opRelease:
			var left int64
			left, msg.Fault, msg.Err = decode(m.kind.DecodeRelease, msg)
			m.releaseReply(now, o, msg, left)
		case opHandoff:
			m.handoffReply(now, o, msg)
		}
		return
	}
	if msg.Op == m.att.op && m.att.req != nil {
		var res AcquireResult
		res, msg.Fault, msg.Err = decode(m.kind.DecodeAcquire, msg)
		if r := m.att.req; unsynced != nil && msg.Fault == NoFault && res.Code == Granted && !r.ending {
			// Too few replicas have the grant: a failover could give the
			// name to another owner. The request ends, and the grant is
			// undone like one that came too late.
			r.ending, r.endErr = true, fmt.Errorf("holdfast: acquire: %w", unsynced)
		}
		m.attemptReply(now, msg, res)
		return
	}
	m.settleStrays(now, msg.Op)
	for _, r := range m.queue {
		if r.placeOp == msg.Op {
			var res AcquireResult
			res, msg.Fault, msg.Err = decode(m.kind.DecodeAcquire, msg)
			m.placeReply(now, msg, res)
			return
		}
	}
}

// decode applies a kind's decoder to a successful reply.
func decode[T any](fn func([]int64) (T, error), msg Msg) (T, Fault, error) {
	var zero T
	if msg.Fault != NoFault {
		return zero, msg.Fault, msg.Err
	}
	v, err := fn(msg.Reply)
	if err != nil {
		return zero, Transient, err
	}
	return v, NoFault, nil
}

func (m *Machine) attemptReply(now time.Time, msg Msg, res AcquireResult) {
	r, sent, woke, handoff := m.att.req, m.att.sent, m.att.woke, m.att.handoff
	m.att = attempt{op: m.att.op}
	switch msg.Fault {
	case Ambiguous, Transient, Demoted:
		if msg.Fault == Ambiguous {
			r.ambiguous = true
		}
		m.attemptErr = msg.Err
		if r.ending || r.tryOnce {
			// A request that gave up, or tries once: its one call failed,
			// and that is its answer (a try-once never waits for a retry).
			if r.ambiguous {
				m.undo(now, r.Field, 1, sent.Add(r.Lease))
			}
			err := r.endErr
			if !r.ending {
				err = withLast(ErrWaitTimeout, "last error", msg.Err)
			}
			m.removeWaiting(r)
			m.finish(r, err)
			return
		}
		m.blockFor(now, m.nextBackoff())
		return
	case Permanent:
		m.removeWaiting(r)
		m.finish(r, msg.Err)
		return
	}
	m.backoff = m.cfg.Backoff
	m.attemptErr = nil
	switch res.Code {
	case Granted:
		m.removeWaiting(r)
		m.unqueue(r)
		o := m.newOwner(r.Field, res.Count, res.Token)
		o.mode = r.Mode
		deadline := Validity(sent, r.Lease)
		late := !deadline.After(now.Add(m.cfg.Slack))
		if r.ending && !late && m.kind.Place != nil && m.fieldWaits(r.Field) {
			// The grant took the place of r's owner field, and another
			// request of the field waits on that place: undoing the grant
			// would send it to the back of the queue. r holds without being
			// told, the waiting requests re-enter, then r releases.
			r.state, r.owner = stateHeld, o
			o.held = append(o.held, r)
			m.extendDeadline(o, deadline)
			m.fieldWaitersTo(o)
			m.askRelease(now, r)
			return
		}
		if r.ending || late {
			// Granted to a request that gave up, or too late to be of use.
			o.undo = true
			o.undoUntil = sent.Add(r.Lease)
			m.startRelease(now, o, nil, res.Count)
			if r.ending {
				m.finish(r, r.endErr)
			} else {
				r.ambiguous = false
				m.queue = append([]*request{r}, m.queue...)
			}
			return
		}
		if !handoff {
			m.streak, m.streakStart = 0, now
		}
		m.grant(now, o, r, sent)
		m.fieldWaitersTo(o)
		m.nextOp(now, o)
	case Held:
		r.heard = true
		// A kind that queues waiters in Redis left a place for r there,
		// unless r only tried once.
		r.ambiguous = m.queues(r) && !r.tryOnce
		if r.ending || r.tryOnce {
			err := r.endErr
			if !r.ending {
				err = ErrWaitTimeout
			}
			if r.ambiguous {
				m.undoFor(now, r, now.Add(m.cfg.WaiterTimeout))
			}
			m.removeWaiting(r)
			m.finish(r, err)
		} else if r.ambiguous {
			m.setPlaced(now, r)
		}
		if woke {
			// A release was announced while the attempt was in flight: it may
			// have come after the script ran. Try again at once.
			m.unheard = true
			return
		}
		if len(m.queue) > 0 {
			m.subscribe(m.queue[0])
		}
		sleep := retryAfter(res.PTTL, m.cfg.NoTTLRetry)
		if m.queues(r) && m.cfg.WaiterTimeout > 0 {
			// Redis may grant r while it sleeps and the grant's message may
			// be lost: r must look again before an unconfirmed grant passes
			// on (WaiterTimeout).
			sleep = min(sleep, m.cfg.WaiterTimeout/3)
		}
		m.blockFor(now, sleep)
	case Refused:
		m.removeWaiting(r)
		m.finish(r, res.Err)
	default:
		// The owner's count in Redis is not zero though this client holds
		// nothing under it. Fields carry a random per-Client instance, so
		// this is a grant the client gave up on (an ambiguous call whose
		// undo did not reach Redis) or a field forged by hand.
		m.removeWaiting(r)
		m.finish(r, fmt.Errorf("holdfast: owner field %q already holds the lock %d times in Redis, unknown to this client (a grant given up after an unanswered call, or another writer using this field; it ends with its lease)", r.Field, res.Count))
	}
}

// retryAfter is how long a refused request sleeps, from the PTTL of the
// key that holds the name: until it ends (wake-ups are hints), at once
// when it ends within the millisecond (PTTL 0: free now), and noTTL when
// the key has no TTL (-1) or the reply carries none.
func retryAfter(pttl, noTTL time.Duration) time.Duration {
	if pttl < 0 {
		return noTTL
	}
	return pttl
}

// fieldWaits reports whether a pending request of field waits in the
// queue, not giving up.
func (m *Machine) fieldWaits(field string) bool {
	for _, q := range m.queue {
		if q.Field == field && q.state == statePending && !q.ending {
			return true
		}
	}
	return false
}

// fieldWaitersTo makes the pending requests of o's field reentries of o,
// in their order.
func (m *Machine) fieldWaitersTo(o *owner) {
	keep := m.queue[:0]
	for _, q := range m.queue {
		if q.Field == o.field {
			m.unqueue(q) // the owner's place, if any, was this grant's
			o.waiting = append(o.waiting, q)
			continue
		}
		keep = append(keep, q)
	}
	for i := len(keep); i < len(m.queue); i++ {
		m.queue[i] = nil
	}
	m.queue = keep
}

func (m *Machine) nextBackoff() time.Duration {
	d := m.backoff
	m.backoff = min(2*m.backoff, m.cfg.MaxBackoff)
	return d
}

// blockFor parks the queue until a wake-up or until d has passed.
func (m *Machine) blockFor(now time.Time, d time.Duration) {
	m.blocked = true
	m.schedule(TimerRetry, 0, now.Add(d))
}

func (m *Machine) wake(now time.Time) {
	if m.att.req != nil {
		m.att.woke = true
		return
	}
	if m.blocked {
		m.blocked = false
		m.cancelTimer(TimerRetry, 0)
	}
	m.unheard = true
}

// subscribe starts interest in the kind's channel for the waiters of r's
// client, unless already subscribed.
func (m *Machine) subscribe(r *request) {
	if m.sub != subNone {
		return
	}
	m.sub, m.channel = subPending, m.kind.Channel(m.env.Name, scripts.ClientOfField(r.Field))
	m.emit(Effect{Kind: EffSubscribe, Channel: m.channel})
}

func (m *Machine) unsubscribe() {
	if m.sub != subNone {
		m.sub = subNone
		m.emit(Effect{Kind: EffUnsubscribe, Channel: m.channel})
	}
}
