package lockactor

import (
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
	if c.HandoffLimit == 0 {
		c.HandoffLimit = 100
	}
	if c.HandoffWindow <= 0 {
		c.HandoffWindow = 10 * time.Millisecond
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
	// granted: EffAcquired was emitted. A request that gave up while its
	// reentry was in flight holds (so that it is released) without it, and
	// is told of no deadline.
	granted bool
	owner   *owner
}

type opKind uint8

const (
	opNone opKind = iota
	opAcquire
	opRelease
	opHandoff // the final release of the owner, handing the lock to a local waiter
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
	cfg Config

	// Small slices rather than maps: a lock has few requests and owners at
	// a time, and a client may hold a hundred thousand locks.
	reqs   []*request // live requests, in arrival order
	queue  []*request // pending requests without a hold of their owner, FIFO
	owners []*owner   // every owner with a hold or an op in Redis, by creation
	nextID uint64

	// The one acquire attempt in flight for the head of queue.
	attemptOp   uint64
	attemptReq  *request
	attemptSent time.Time
	attemptWoke bool // a wake-up arrived while the attempt was in flight
	// attemptHandoff: the attempt is the acquire half of a handoff.
	attemptHandoff bool

	// streak counts the handoffs since the lock was last granted fresh from
	// Redis, at streakStart.
	streak      int
	streakStart time.Time

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
	case MsgAcquireReply:
		m.acquireReply(now, msg)
	case MsgReleaseReply:
		m.releaseReply(now, msg)
	case MsgHandoffReply:
		m.handoffReply(now, msg)
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
	if o := m.ownerOf(req.Field); o != nil && !o.undo {
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
		if o := m.ownerOf(r.Field); r == m.attemptReq || (o != nil && o.opReq == r) {
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

// giveUp ends pending request r with err at once, even while an acquire of
// its is in flight: the wait budget bounds the whole attempt, not just the
// part before a call that may take CallTimeout to fail. The call is settled
// in the background when its reply lands, as for any request that gave up
// with its acquire in flight (r.ending): a grant it made is undone.
func (m *Machine) giveUp(now time.Time, r *request, err error) {
	m.end(now, r, err)
	if r.ending {
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
	m.attemptReq, m.attemptSent, m.attemptWoke, m.attemptHandoff = r, now, false, false
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
	r, sent, woke, handoff := m.attemptReq, m.attemptSent, m.attemptWoke, m.attemptHandoff
	m.attemptReq, m.attemptHandoff = nil, false
	switch msg.Fault {
	case Ambiguous, Transient, Demoted:
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
		if !handoff {
			m.streak, m.streakStart = 0, now
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
