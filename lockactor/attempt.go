package lockactor

import (
	"fmt"
	"slices"
	"time"

	"github.com/holdfast/holdfast/scripts"
)

// Chapter 2, attempts and their replies: the head of the local queue tries
// for the lock, one attempt in flight at a time; a reply grants, refuses,
// or puts the queue to sleep until a wake-up or the holder's TTL.

// kick starts an acquire attempt for the head of the queue when nothing stops
// it, gives the other waiters their places in Redis (kinds that queue
// there), and keeps the channel subscription in step with the queue.
func (m *Machine) kick(now time.Time) {
	m.tryHead(now)
	m.placeAll(now)
	if m.kind.HeadChannel && len(m.queue) > 0 {
		// Whoever heads the queue now, waiting or about to, listens on
		// its own channel: the name tells no other.
		m.subscribeHead(m.queue[0])
	}
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
	m.reorder(now)
	r := m.queue[0]
	// A head whose place call is in flight waits for it: a request has one
	// call in flight at a time.
	if m.blocked || r.placeOp != 0 || !(m.mayAttempt(r) || m.probing(r)) {
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
	m.unheard, m.probe, r.gone = false, false, false
	env := m.env
	if m.kind.Place != nil {
		env.Behind = m.behind(r)
	}
	m.call(m.att.op, m.kind.Acquire(env, &r.Request, 0), r.Field, r.Field)
	m.failTryOnceBehind()
}

// reorder lets the requests the kind puts first (Kind.Ahead) pass the
// waiters queued before them that may be passed (see passable), keeping
// the order among the requests passed and among those passing. A new head
// has not tried yet: it tries at once, as a request that jumped the queue
// does, whatever sleep the queue was in for the head it replaces.
func (m *Machine) reorder(now time.Time) {
	if m.kind.Ahead == nil || len(m.queue) < 2 {
		return
	}
	head := m.queue[0]
	for j := 1; j < len(m.queue); j++ {
		r, i := m.queue[j], j
		for i > 0 && m.passable(m.queue[i-1]) && m.kind.Ahead(&r.Request, &m.queue[i-1].Request, m.holds) {
			i--
		}
		if i < j {
			copy(m.queue[i+1:j+1], m.queue[i:j])
			m.queue[i] = r
		}
	}
	if m.queue[0] != head {
		m.wake(now)
	}
}

// passable reports whether a request may be passed in the local queue: it
// waits, and no call of its may have granted it (the attempt in flight, a
// try that got no answer, a place call) — such a request must learn its
// outcome first, or a grant of its would stand in the way of the request
// that passed it.
func (m *Machine) passable(q *request) bool {
	return q.state == statePending && q != m.att.req && !q.ambiguous && q.placeOp == 0
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

// probing reports whether head r may try although this client holds an
// exclusive kind (see Machine.probe): only past holds with no call in
// flight, and never past a hold of r's own field.
func (m *Machine) probing(r *request) bool {
	if !m.probe || m.kind.MayAttempt != nil || m.fieldBusy(r.Field) {
		return false
	}
	for _, o := range m.owners {
		if o.field == r.Field || o.undo || o.op.kind != opNone {
			return false
		}
	}
	return true
}

// staleHolds ends the holds a fresh grant of an exclusive kind to field
// shows are gone in Redis: the other owners with no call in flight, which
// a failover's roll-back took behind their backs.
func (m *Machine) staleHolds(now time.Time, field string) {
	if m.kind.MayAttempt != nil {
		return
	}
	stale := func(o *owner) bool { return o.field != field && !o.undo && o.op.kind == opNone }
	if !slices.ContainsFunc(m.owners, stale) {
		return // the common case: no copy of the owners to make
	}
	for _, o := range slices.Clone(m.owners) {
		if stale(o) {
			m.ownerLost(now, o, fmt.Errorf("%w: Redis granted the lock to another waiter of this client (a failover rolled the hold back)", ErrNotOwner))
		}
	}
}

// holds yields this client's holds on the name, for the kind's policy.
func (m *Machine) holds(yield func(Hold) bool) {
	for _, o := range m.owners {
		if !yield(Hold{Field: o.field, Mode: o.mode, Count: o.count, Undo: o.undo}) {
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
	if msg.Fault != NoFault && msg.Fault != Unsynced {
		m.faulted = true
	}
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
				m.undo(now, r.Field, 1, m.undoHorizon(sent, r))
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
			m.staleHolds(now, r.Field)
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
				m.undoFor(now, r, m.undoHorizon(now, r))
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
		m.blockFor(now, m.refusedSleep(r, res.PTTL))
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

// refusedSleep is how long the machine sleeps after r was refused with
// pttl: until the key that holds the name ends, and, when r queues in
// Redis, at most a third of WaiterTimeout: Redis may grant r while it
// sleeps and the grant's message may be lost, so r must look again before
// an unconfirmed grant passes on; and a new hold is announced to the
// queue's head only when it could end before the head looks again that
// often (tell_head in fair_common.lua).
func (m *Machine) refusedSleep(r *request, pttl time.Duration) time.Duration {
	sleep := retryAfter(pttl, m.cfg.NoTTLRetry)
	if m.queues(r) && m.cfg.WaiterTimeout > 0 {
		sleep = min(sleep, m.cfg.WaiterTimeout/3)
	}
	return sleep
}

// retryAfter is how long a refused request sleeps, from the PTTL of the
// key that holds the name: until it ends (wake-ups are hints) — a PTTL is
// whole milliseconds, cut short, so the key ends within the millisecond
// after it, and a PTTL of 0 means "free now" — and noTTL when the key has
// no TTL (-1) or the reply carries none.
func retryAfter(pttl, noTTL time.Duration) time.Duration {
	if pttl < 0 {
		return noTTL
	}
	return pttl + time.Millisecond
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
	if m.kind.HeadChannel {
		m.subscribeHead(r)
		return
	}
	if m.sub != subNone {
		return
	}
	m.sub, m.channel = subPending, m.kind.Channel(m.env.Name, scripts.ClientOfField(r.Field))
	m.emit(Effect{Kind: EffSubscribe, Channel: m.channel})
}

// subscribeHead keeps the subscription of a HeadChannel kind on the
// channel of the head of the local queue (r when the queue is empty).
func (m *Machine) subscribeHead(r *request) {
	if len(m.queue) > 0 {
		r = m.queue[0]
	}
	ch := m.kind.Channel(m.env.Name, r.Field)
	if m.sub != subNone {
		if ch == m.channel {
			return
		}
		m.unsubscribe()
	}
	m.sub, m.channel = subPending, ch
	m.emit(Effect{Kind: EffSubscribe, Channel: m.channel})
}

func (m *Machine) unsubscribe() {
	if m.sub != subNone {
		m.sub = subNone
		m.emit(Effect{Kind: EffUnsubscribe, Channel: m.channel})
	}
}
