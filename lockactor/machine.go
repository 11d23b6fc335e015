package lockactor

import (
	"fmt"
	"sort"
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
}

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
	// ambiguous: an acquire for this request may have run in Redis without
	// its reply reaching us; if the request ends, the grant must be undone.
	ambiguous bool
	// ending is set when the request must end as soon as its in-flight
	// acquire is answered; endErr is the cause it ends with.
	ending bool
	endErr error
	// releaseAsked: a Release call waits for EffReleaseDone.
	releaseAsked bool
	owner        *owner
}

type opKind uint8

const (
	opNone opKind = iota
	opAcquire
	opRelease
)

// owner is the hold of one owner field in Redis, as this machine believes it.
type owner struct {
	gen      uint64
	field    string
	count    int64 // the owner's reentry count in Redis
	token    uint64
	lease    time.Duration
	watchdog bool
	deadline time.Time
	held     []*request // requests holding the lock through this owner
	waiting  []*request // reentries and releases waiting for the op slot, in order

	op         opKind
	opID       uint64
	opReq      *request // nil for an undo or a shutdown release
	opExpected int64
	opSent     time.Time
	opRetried  bool          // the op repeats an ambiguous one
	opUnsure   bool          // the op's last try may or may not have run
	backoff    time.Duration // next delay if the op fails again
	undoUntil  time.Time     // undo owners: a possible grant has expired by then
	undo       bool

	renewNext     time.Time // next renewal on the absolute grid sent + k*lease/3
	renewInFlight bool
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
	cfg Config

	reqs   map[ReqID]*request
	queue  []*request // pending requests without a hold of their owner, FIFO
	owners map[string]*owner
	byGen  map[uint64]*owner
	nextID uint64

	// The one acquire attempt in flight for the head of queue.
	attemptOp   uint64
	attemptReq  *request
	attemptSent time.Time
	attemptWoke bool // a wake-up arrived while the attempt was in flight

	blocked  bool // the lock is held elsewhere; wait for a wake-up or the retry timer
	backoff  time.Duration
	sub      subState
	shutdown error

	out []Effect
}

// New returns an empty machine.
func New(cfg Config) *Machine {
	cfg.setDefaults()
	return &Machine{
		cfg:     cfg,
		reqs:    make(map[ReqID]*request),
		owners:  make(map[string]*owner),
		byGen:   make(map[uint64]*owner),
		backoff: cfg.Backoff,
	}
}

// Idle reports whether the machine holds nothing, waits for nothing and has
// nothing in flight, so that its actor may stop.
func (m *Machine) Idle() bool {
	return len(m.reqs) == 0 && len(m.owners) == 0 && m.attemptReq == nil && m.sub == subNone
}

// Step applies one input at time now and returns the effects to carry out,
// in order. The returned slice is reused by the next call.
func (m *Machine) Step(now time.Time, msg Msg) []Effect {
	m.out = m.out[:0]
	switch msg.Kind {
	case MsgEnqueue:
		m.enqueue(now, msg.Req)
	case MsgCancel:
		if r := m.reqs[msg.ID]; r != nil {
			m.end(now, r, msg.Err)
		}
	case MsgRelease:
		m.release(now, msg.ID)
	case MsgShutdown:
		m.close(now, msg.Err)
	case MsgAcquireReply:
		m.acquireReply(now, msg)
	case MsgReleaseReply:
		m.releaseReply(now, msg)
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
	m.kick(now)
	return m.out
}

func (m *Machine) emit(e Effect) { m.out = append(m.out, e) }

func (m *Machine) schedule(kind TimerKind, id uint64, at time.Time) {
	m.emit(Effect{Kind: EffSchedule, Timer: TimerKey{kind, id}, At: at})
}

func (m *Machine) cancelTimer(kind TimerKind, id uint64) {
	m.emit(Effect{Kind: EffCancelTimer, Timer: TimerKey{kind, id}})
}

func (m *Machine) id() uint64 { m.nextID++; return m.nextID }

// --- requests ---

func (m *Machine) enqueue(now time.Time, req Request) {
	r := &request{Request: req, tryOnce: req.Wait == 0}
	m.reqs[req.ID] = r
	if m.shutdown != nil {
		m.finish(r, m.shutdown)
		return
	}
	if req.Wait > 0 {
		m.schedule(TimerWait, uint64(req.ID), now.Add(req.Wait))
	}
	if o := m.owners[req.Field]; o != nil && !o.undo {
		o.waiting = append(o.waiting, r)
		m.nextOp(now, o)
		return
	}
	m.queue = append(m.queue, r)
}

// end makes request r give up (pending) or release (held) and end with err.
func (m *Machine) end(now time.Time, r *request, err error) {
	switch r.state {
	case statePending:
		if o := m.owners[r.Field]; r == m.attemptReq || (o != nil && o.opReq == r) {
			// The outcome of its acquire is in flight; decide when it lands.
			r.ending, r.endErr = true, err
			return
		}
		m.removeWaiting(r)
		if r.ambiguous && r.owner == nil {
			m.undo(now, r.Field, 1, now.Add(r.Lease))
		}
		m.finish(r, err)
	case stateHeld:
		r.endErr = err
		m.askRelease(now, r)
	case stateReleasing:
		// Already on its way out; the first cause stands.
	}
}

func (m *Machine) release(now time.Time, id ReqID) {
	r := m.reqs[id]
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
	if _, live := m.reqs[r.ID]; !live {
		return
	}
	delete(m.reqs, r.ID)
	if r.Wait > 0 {
		m.cancelTimer(TimerWait, uint64(r.ID))
	}
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
// it, and keeps the channel subscription in step with the queue.
func (m *Machine) kick(now time.Time) {
	if len(m.queue) == 0 {
		if m.attemptReq == nil {
			if m.sub != subNone {
				m.sub = subNone
				m.emit(Effect{Kind: EffUnsubscribe})
			}
			if m.blocked {
				m.blocked = false
				m.cancelTimer(TimerRetry, 0)
			}
		}
		return
	}
	if m.attemptReq != nil {
		m.failTryOnce(false)
		return
	}
	if len(m.owners) > 0 || m.blocked {
		// Held here or elsewhere: a try-once request cannot be granted now.
		m.failTryOnce(true)
		return
	}
	r := m.queue[0]
	m.attemptReq, m.attemptSent, m.attemptWoke = r, now, false
	m.attemptOp = m.id()
	m.emit(Effect{Kind: EffAcquire, Op: m.attemptOp, Field: r.Field, Lease: r.Lease})
	m.failTryOnce(false)
}

// failTryOnce ends the try-once requests that would have to wait: all of them
// when all, else those behind the one with an attempt in flight.
func (m *Machine) failTryOnce(all bool) {
	keep := m.queue[:0]
	var failed []*request
	for _, r := range m.queue {
		if r.tryOnce && (all || r != m.attemptReq) && !r.ambiguous {
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

func (m *Machine) acquireReply(now time.Time, msg Msg) {
	if msg.Op == m.attemptOp && m.attemptReq != nil {
		m.attemptReply(now, msg)
		return
	}
	for _, o := range m.owners {
		if o.op == opAcquire && o.opID == msg.Op {
			m.reentryReply(now, o, msg)
			return
		}
	}
}

func (m *Machine) attemptReply(now time.Time, msg Msg) {
	r, sent, woke := m.attemptReq, m.attemptSent, m.attemptWoke
	m.attemptReq = nil
	switch msg.Fault {
	case Ambiguous, Transient:
		if msg.Fault == Ambiguous {
			r.ambiguous = true
		}
		if r.ending {
			if r.ambiguous {
				m.undo(now, r.Field, 1, sent.Add(r.Lease))
			}
			m.removeWaiting(r)
			m.finish(r, r.endErr)
			return
		}
		m.blockFor(now, m.nextBackoff())
		return
	case Permanent:
		m.removeWaiting(r)
		m.finish(r, fmt.Errorf("holdfast: acquire: %w", msg.Err))
		return
	}
	m.backoff = m.cfg.Backoff
	res := msg.Acquire
	switch res.Code {
	case scripts.AcquireGranted:
		m.removeWaiting(r)
		o := m.newOwner(r.Field, res.Count, res.Token)
		deadline := Validity(sent, r.Lease)
		if r.ending || !deadline.After(now.Add(m.cfg.Slack)) {
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
		m.grant(now, o, r, sent)
		// Other pending requests of the same owner are reentries now.
		keep := m.queue[:0]
		for _, q := range m.queue {
			if q.Field == o.field {
				o.waiting = append(o.waiting, q)
				continue
			}
			keep = append(keep, q)
		}
		m.queue = keep
		m.nextOp(now, o)
	case scripts.AcquireHeld:
		r.ambiguous = false
		if r.ending || r.tryOnce {
			err := r.endErr
			if !r.ending {
				err = ErrWaitTimeout
			}
			m.removeWaiting(r)
			m.finish(r, err)
		}
		if woke {
			// A release was announced while the attempt was in flight: it may
			// have come after the script ran. Try again at once.
			return
		}
		if m.sub == subNone && len(m.queue) > 0 {
			m.sub = subPending
			m.emit(Effect{Kind: EffSubscribe})
		}
		sleep := res.PTTL
		if sleep <= 0 {
			sleep = m.cfg.NoTTLRetry
		}
		m.blockFor(now, sleep)
	default:
		// The owner's count in Redis is not zero though this client holds
		// nothing under it: another process writes with the same ClientID.
		m.removeWaiting(r)
		m.finish(r, fmt.Errorf("holdfast: owner field %q already holds the lock %d times in Redis, unknown to this client (is the ClientID shared by two processes?)", r.Field, res.Count))
	}
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
	if m.attemptReq != nil {
		m.attemptWoke = true
		return
	}
	if m.blocked {
		m.blocked = false
		m.cancelTimer(TimerRetry, 0)
	}
}

// --- owners: holds, reentry, release ---

func (m *Machine) newOwner(field string, count int64, token uint64) *owner {
	o := &owner{gen: m.id(), field: field, count: count, token: token, backoff: m.cfg.Backoff}
	m.owners[field] = o
	m.byGen[o.gen] = o
	return o
}

// grant makes r a holder through o, with a lease whose request was sent at sent.
func (m *Machine) grant(now time.Time, o *owner, r *request, sent time.Time) {
	r.state, r.owner, r.ambiguous = stateHeld, o, false
	if r.Wait > 0 {
		m.cancelTimer(TimerWait, uint64(r.ID))
	}
	o.held = append(o.held, r)
	o.lease = max(o.lease, r.Lease)
	if d := Validity(sent, r.Lease); d.After(o.deadline) {
		o.deadline = d
		m.schedule(TimerDeadline, o.gen, d.Add(-m.cfg.Slack))
		for _, h := range o.held[:len(o.held)-1] {
			m.emit(Effect{Kind: EffDeadline, ID: h.ID, At: d})
		}
	}
	if r.Watchdog && !o.watchdog {
		o.watchdog = true
		o.renewNext = sent.Add(r.Lease / 3)
		m.schedule(TimerRenew, o.gen, o.renewNext)
	}
	m.emit(Effect{Kind: EffAcquired, ID: r.ID, Token: o.token, At: o.deadline})
}

// askRelease queues the release of held request r on its owner.
func (m *Machine) askRelease(now time.Time, r *request) {
	o := r.owner
	r.state = stateReleasing
	o.waiting = append(o.waiting, r)
	m.nextOp(now, o)
}

// nextOp starts the owner's next queued reentry or release when its op slot is free.
func (m *Machine) nextOp(now time.Time, o *owner) {
	if o.op != opNone || o.undo {
		return
	}
	if m.shutdown != nil {
		// Closing: pending reentries end; one release of the whole field
		// ends every hold of this owner.
		for _, w := range o.waiting {
			if w.state == statePending {
				m.finish(w, m.shutdown)
			}
		}
		o.waiting = nil
		if len(o.held) > 0 {
			m.startRelease(now, o, nil, 0)
		}
		return
	}
	if len(o.waiting) == 0 {
		return
	}
	r := o.waiting[0]
	o.waiting = o.waiting[1:]
	if r.state == stateReleasing {
		m.startRelease(now, o, r, o.count)
		return
	}
	o.op, o.opReq, o.opExpected, o.opSent, o.opRetried, o.opUnsure = opAcquire, r, o.count, now, false, false
	o.opID = m.id()
	m.emit(Effect{Kind: EffAcquire, Op: o.opID, Field: o.field, Lease: r.Lease, Expected: o.count})
}

func (m *Machine) startRelease(now time.Time, o *owner, r *request, expected int64) {
	o.op, o.opReq, o.opExpected, o.opSent, o.opRetried, o.opUnsure = opRelease, r, expected, now, false, false
	o.opID = m.id()
	if expected <= 1 {
		// This release ends the hold: stop renewing it.
		m.stopRenewal(o)
	}
	m.emit(Effect{Kind: EffRelease, Op: o.opID, Field: o.field, Expected: expected})
}

// repeatOp sends the owner's op again with the same arguments.
func (m *Machine) repeatOp(o *owner) {
	o.opID = m.id()
	o.opRetried = true
	if o.op == opAcquire {
		m.emit(Effect{Kind: EffAcquire, Op: o.opID, Field: o.field, Lease: o.opReq.Lease, Expected: o.opExpected})
		return
	}
	m.emit(Effect{Kind: EffRelease, Op: o.opID, Field: o.field, Expected: o.opExpected})
}

// undo removes a grant that may have happened for field, in the background.
func (m *Machine) undo(now time.Time, field string, count int64, until time.Time) {
	if o := m.owners[field]; o != nil {
		// The owner is busy in Redis already; its own ops settle the count.
		return
	}
	o := m.newOwner(field, count, 0)
	o.undo, o.undoUntil = true, until
	m.startRelease(now, o, nil, count)
}

func (m *Machine) reentryReply(now time.Time, o *owner, msg Msg) {
	r := o.opReq
	o.op, o.opReq = opNone, nil
	switch msg.Fault {
	case Transient:
		if r.ending {
			m.finish(r, r.endErr)
			m.nextOp(now, o)
			return
		}
		o.waiting = append([]*request{r}, o.waiting...)
		m.opBackoff(now, o)
		return
	case Ambiguous:
		if m.shutdown != nil {
			// Closing: the release of the whole field settles it.
			m.finish(r, m.shutdown)
			m.nextOp(now, o)
			return
		}
		// Repeat to learn the outcome, even for a request that gave up.
		o.op, o.opReq, o.opUnsure = opAcquire, r, true
		m.opBackoff(now, o)
		return
	case Permanent:
		o.waiting = append([]*request{r}, o.waiting...)
		m.ownerLost(now, o, fmt.Errorf("%w: %v", ErrNotOwner, msg.Err))
		return
	}
	o.backoff = m.cfg.Backoff
	res := msg.Acquire
	switch {
	case res.Code == scripts.AcquireGranted && res.Count == o.opExpected+1:
		o.count = res.Count
		if r.ending {
			r.state = stateHeld
			r.owner = o
			o.held = append(o.held, r)
			m.askRelease(now, r)
		} else {
			m.grant(now, o, r, o.opSent)
		}
	case res.Code == scripts.AcquireMismatch && res.Count == 0:
		// The owner's hold is gone from Redis.
		o.waiting = append([]*request{r}, o.waiting...)
		m.ownerLost(now, o, ErrNotOwner)
		return
	default:
		o.waiting = append([]*request{r}, o.waiting...)
		m.ownerLost(now, o, fmt.Errorf("%w: Redis shows reentry count %d where this client expected %d", ErrNotOwner, res.Count, o.opExpected))
		return
	}
	m.nextOp(now, o)
}

func (m *Machine) opBackoff(now time.Time, o *owner) {
	d := o.backoff
	o.backoff = min(2*o.backoff, m.cfg.MaxBackoff)
	if o.op == opNone {
		// Nothing to repeat; the waiting queue restarts after the delay.
		o.op = opAcquire
		o.opReq = o.waiting[0]
		o.waiting = o.waiting[1:]
		o.opExpected = o.count
	}
	m.schedule(TimerOpRetry, o.gen, now.Add(d))
}

func (m *Machine) releaseReply(now time.Time, msg Msg) {
	var o *owner
	for _, c := range m.owners {
		if c.op == opRelease && c.opID == msg.Op {
			o = c
			break
		}
	}
	if o == nil {
		return
	}
	r := o.opReq
	if msg.Fault == Ambiguous {
		o.opUnsure = true
	}
	if msg.Fault != NoFault && msg.Fault != Permanent {
		limit := o.deadline
		if o.undo {
			limit = o.undoUntil
		}
		if m.shutdown != nil || !now.Before(limit) {
			// No retries while closing; past the deadline the key expires by itself.
			m.releaseSettled(now, o, r, 0, fmt.Errorf("holdfast: release not confirmed by Redis (the lease runs out by itself): %w", msg.Err))
			return
		}
		m.opBackoff(now, o)
		return
	}
	if msg.Fault == Permanent {
		m.releaseSettled(now, o, r, 0, fmt.Errorf("%w: %v", ErrNotOwner, msg.Err))
		return
	}
	o.backoff = m.cfg.Backoff
	switch left := msg.Left; {
	case left >= 0:
		m.releaseSettled(now, o, r, left, nil)
	case left == scripts.ReleaseNotOwner && (o.undo || o.opRetried && o.opExpected <= 1):
		m.releaseSettled(now, o, r, 0, nil)
	case left == scripts.ReleaseNotOwner:
		m.releaseSettled(now, o, r, 0, ErrNotOwner)
	default:
		m.releaseSettled(now, o, r, 0, fmt.Errorf("%w: Redis shows another reentry count than this client expected (%d)", ErrNotOwner, o.opExpected))
	}
}

// releaseSettled applies the outcome of a release op: the owner's count is now
// left, and err (if any) says the hold was not ours any more.
func (m *Machine) releaseSettled(now time.Time, o *owner, r *request, left int64, err error) {
	o.op, o.opReq = opNone, nil
	o.count = left
	if r != nil {
		m.dropHeld(o, r)
		cause := r.endErr
		if err != nil {
			cause = err
		}
		m.answerRelease(r, err)
		m.finish(r, cause)
	}
	if err != nil || left == 0 {
		lost := err
		if r == nil && !o.undo && m.shutdown != nil {
			lost = m.shutdown
		}
		if lost == nil {
			// Count 0 with holders left cannot happen while counts agree.
			lost = ErrNotOwner
		}
		m.ownerLost(now, o, lost)
		return
	}
	m.nextOp(now, o)
}

func (m *Machine) dropHeld(o *owner, r *request) {
	for i, h := range o.held {
		if h == r {
			o.held = append(o.held[:i], o.held[i+1:]...)
			return
		}
	}
}

// ownerLost ends owner o: its holders end with err, its waiting reentries go
// back to the queue as fresh requests, its timers stop.
func (m *Machine) ownerLost(now time.Time, o *owner, err error) {
	if m.owners[o.field] == o {
		delete(m.owners, o.field)
	}
	delete(m.byGen, o.gen)
	m.stopRenewal(o)
	m.cancelTimer(TimerDeadline, o.gen)
	m.cancelTimer(TimerOpRetry, o.gen)
	for _, h := range o.held {
		h.owner = nil
		m.finish(h, err)
	}
	o.held = nil
	var back []*request
	for _, w := range append(o.waiting, o.opReq) {
		if w == nil {
			continue
		}
		w.owner = nil
		if w.state == stateReleasing {
			m.finish(w, err)
			continue
		}
		if w.ending {
			m.finish(w, w.endErr)
			continue
		}
		back = append(back, w)
	}
	o.waiting, o.opReq, o.op = nil, nil, opNone
	if len(back) > 0 {
		m.queue = append(back, m.queue...)
	}
}

func (m *Machine) stopRenewal(o *owner) {
	if o.watchdog {
		o.watchdog = false
		m.cancelTimer(TimerRenew, o.gen)
	}
}

// --- renewal ---

func (m *Machine) renewReply(now time.Time, msg Msg) {
	o := m.byGen[msg.Op]
	if o == nil {
		return
	}
	o.renewInFlight = false
	if !o.watchdog {
		return
	}
	switch {
	case msg.Fault == Permanent || (msg.Fault == NoFault && !msg.Renewed):
		m.ownerLost(now, o, ErrNotOwner)
	case msg.Fault != NoFault:
		// Try again soon; the deadline timer ends the hold if none succeeds.
		if retry := now.Add(m.cfg.Backoff); retry.Before(o.renewNext) {
			m.schedule(TimerRenew, o.gen, retry)
		}
	default:
		if d := Validity(msg.Sent, o.lease); d.After(o.deadline) {
			o.deadline = d
			m.schedule(TimerDeadline, o.gen, d.Add(-m.cfg.Slack))
			for _, h := range o.held {
				m.emit(Effect{Kind: EffDeadline, ID: h.ID, At: d})
			}
		}
	}
}

// --- timers ---

func (m *Machine) timer(now time.Time, k TimerKey) {
	switch k.Kind {
	case TimerWait:
		if r := m.reqs[ReqID(k.ID)]; r != nil && r.state == statePending {
			m.end(now, r, ErrWaitTimeout)
		}
	case TimerRetry:
		m.blocked = false
	case TimerRenew:
		o := m.byGen[k.ID]
		if o == nil || !o.watchdog {
			return
		}
		if !now.Before(o.renewNext) {
			for !now.Before(o.renewNext) {
				o.renewNext = o.renewNext.Add(o.lease / 3)
			}
		}
		m.schedule(TimerRenew, o.gen, o.renewNext)
		if !o.renewInFlight {
			o.renewInFlight = true
			m.emit(Effect{Kind: EffRenew, Op: o.gen, Field: o.field, Lease: o.lease})
		}
	case TimerDeadline:
		o := m.byGen[k.ID]
		if o == nil {
			return
		}
		if o.undo {
			return
		}
		// The hold may still be live in Redis for Slack+drift, but no renewal
		// confirmed it: it is lost now, before anyone else can be granted it.
		for _, h := range o.held {
			m.answerRelease(h, ErrLeaseExpired)
		}
		if o.op != opNone {
			// Let the op's reply be dropped: the owner is gone.
			o.opID = 0
		}
		m.ownerLost(now, o, ErrLeaseExpired)
	case TimerOpRetry:
		o := m.byGen[k.ID]
		if o == nil || o.op == opNone {
			return
		}
		if o.op == opAcquire && o.opReq != nil && !o.opUnsure && o.opReq.ending {
			// A transient failure for a request that has given up: drop it.
			r := o.opReq
			o.op, o.opReq = opNone, nil
			m.finish(r, r.endErr)
			m.nextOp(now, o)
			return
		}
		if o.op == opAcquire {
			o.opSent = now
		}
		m.repeatOp(o)
	}
}

// --- shutdown ---

func (m *Machine) close(now time.Time, err error) {
	if m.shutdown != nil {
		return
	}
	m.shutdown = err
	for _, r := range append([]*request(nil), m.queue...) {
		m.end(now, r, err)
	}
	// In a fixed order (of creation), so that a run is reproducible.
	owners := make([]*owner, 0, len(m.owners))
	for _, o := range m.owners {
		owners = append(owners, o)
	}
	sort.Slice(owners, func(i, j int) bool { return owners[i].gen < owners[j].gen })
	for _, o := range owners {
		if o.opReq != nil && o.opReq.state == statePending {
			o.opReq.ending, o.opReq.endErr = true, err
		}
		for _, h := range o.held {
			if h.state == stateHeld {
				h.state, h.endErr = stateReleasing, err
			}
		}
		m.stopRenewal(o)
		m.nextOp(now, o)
	}
}
