package lockactor

import (
	"fmt"
	"slices"
	"time"

	"github.com/holdfast/holdfast/scripts"
)

// Owners: holds, reentry and release, one Redis operation per owner field
// at a time.

func (m *Machine) newOwner(field string, count int64, token uint64) *owner {
	if prev := m.ownerOf(field); prev != nil {
		prev.current = false
	}
	o := &owner{gen: m.id(), field: field, count: count, token: token, backoff: m.cfg.Backoff, current: true}
	m.owners = append(m.owners, o)
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
			if h.granted {
				if h.granted {
					m.emit(Effect{Kind: EffDeadline, ID: h.ID, At: d})
				}
			}
		}
	}
	if r.Watchdog && !o.watchdog {
		o.watchdog = true
		o.renewNext = firstRenewal(sent, r.Lease)
		m.schedule(TimerRenew, o.gen, o.renewNext)
	}
	r.granted = true
	m.emit(Effect{Kind: EffAcquired, ID: r.ID, Token: o.token, At: o.deadline})
}

// firstRenewal is when a hold granted by a request sent at sent first
// renews: lease/3 later, moved back onto a grid of lease/30 steps, so that
// holds taken at about the same time renew in the same tick and the
// watchdog sends them in full batches. Renewing early is always safe.
func firstRenewal(sent time.Time, lease time.Duration) time.Time {
	at := sent.Add(lease / 3)
	q := int64(lease / 30)
	if q <= 0 {
		return at
	}
	off := at.UnixNano() % q
	if off < 0 {
		off += q
	}
	return at.Add(-time.Duration(off))
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
		if h := m.handoffTo(now, o); h != nil {
			m.startHandoff(now, o, r, h)
			return
		}
		o.yield = o.count == 1 && len(o.waiting) == 0 && len(m.queue) > 0
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

// handoffTo returns the local waiter that owner o's final release may hand
// the lock to, or nil when the release must go to Redis.
func (m *Machine) handoffTo(now time.Time, o *owner) *request {
	if m.cfg.HandoffLimit < 0 || o.count != 1 || len(o.held) != 1 || len(o.waiting) != 0 ||
		len(m.queue) == 0 || m.attemptReq != nil {
		return nil
	}
	if m.streak >= m.cfg.HandoffLimit || now.Sub(m.streakStart) >= m.cfg.HandoffWindow {
		return nil
	}
	if h := m.queue[0]; !h.ending && h.Field != o.field {
		return h
	}
	return nil
}

// startHandoff releases owner o's hold (request r) and acquires for the
// waiter h in one call. The acquire half is h's attempt: it is answered as
// one, and h's cancellation waits for it as for any attempt in flight.
func (m *Machine) startHandoff(now time.Time, o *owner, r, h *request) {
	o.op, o.opReq, o.opExpected, o.opSent, o.opRetried, o.opUnsure = opHandoff, r, 1, now, false, false
	o.opID = m.id()
	m.stopRenewal(o)
	m.streak++
	m.attemptReq, m.attemptSent, m.attemptWoke, m.attemptHandoff = h, now, false, true
	m.attemptOp = o.opID
	m.emit(Effect{Kind: EffHandoff, Op: o.opID, Field: o.field, To: h.Field, Lease: h.Lease})
}

// handoffReply settles both halves of a handoff. The release half is
// settled as a release's reply would be; if the call may not have run, it
// is repeated as a plain release (the acquire half, ambiguous then, is
// learned by the waiter's next attempt, which answers a grant that already
// ran).
func (m *Machine) handoffReply(now time.Time, msg Msg) {
	for _, o := range m.owners {
		if o.op == opHandoff && o.opID == msg.Op {
			o.op = opRelease
			m.releaseReply(now, Msg{Kind: MsgReleaseReply, Op: msg.Op, Left: msg.Left, Fault: msg.Fault, Err: msg.Err})
			break
		}
	}
	if msg.Op == m.attemptOp && m.attemptReq != nil {
		m.attemptReply(now, Msg{Kind: MsgAcquireReply, Op: msg.Op, Acquire: msg.Acquire, Fault: msg.Fault, Err: msg.Err})
	}
}

// yieldTurn makes this client's waiters wait for the announcement of the
// release just made (or the subscription that lets them hear the next),
// so that they compete for the lock with other processes' waiters on equal
// terms instead of taking it straight back.
func (m *Machine) yieldTurn(now time.Time) {
	if m.sub == subNone {
		m.sub = subPending
		m.emit(Effect{Kind: EffSubscribe})
	}
	m.blockFor(now, m.cfg.Backoff)
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
	if o := m.ownerOf(field); o != nil {
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
	case Transient, Demoted:
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
		if o.yield && err == nil && m.shutdown == nil && len(m.queue) > 0 && m.attemptReq == nil && !m.blocked {
			m.yieldTurn(now)
		}
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
	if i := slices.Index(m.owners, o); i >= 0 {
		m.owners = slices.Delete(m.owners, i, i+1)
	}
	o.current = false
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
