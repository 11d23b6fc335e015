package lockactor

import (
	"errors"
	"fmt"
	"time"

	"github.com/holdfast/holdfast/scripts"
)

// Chapter 4, release and undo: an owner's one Redis operation at a time
// (reentry, release, local handoff), repeated until its outcome is known,
// and the undo of a grant nobody wants any more.

func (m *Machine) release(now time.Time, id ReqID) {
	r := m.req(id)
	if r == nil {
		m.emit(Effect{Kind: EffReleaseDone, ID: id, Err: ErrNotHeld})
		return
	}
	r.releaseAsked, r.releaseAt = true, now
	switch r.state {
	case statePending:
		m.end(now, r, ErrReleased)
	case stateHeld:
		r.endErr = ErrReleased
		m.askRelease(now, r)
	case stateReleasing:
	}
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
	if o.op.kind != opNone || o.undo {
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
		o.yield = m.kind.YieldAfterRelease && o.count == 1 && len(o.waiting) == 0 && len(m.queue) > 0
		m.startRelease(now, o, r, o.count)
		return
	}
	o.op.start(opAcquire, m.id(), r, o.count, now)
	m.call(o.op.id, m.kind.Acquire(m.env, &r.Request, o.count), o.field, o.field)
}

func (m *Machine) startRelease(now time.Time, o *owner, r *request, expected int64) {
	o.op.start(opRelease, m.id(), r, expected, now)
	if expected <= 1 {
		// This release ends the hold: stop renewing it.
		m.stopRenewal(o)
	}
	m.call(o.op.id, m.kind.Release(m.releaseEnv(o), o.field, expected), "", o.field)
}

// handoffTo returns the local waiter that owner o's final release may hand
// the lock to, or nil when the release must go to Redis.
func (m *Machine) handoffTo(now time.Time, o *owner) *request {
	if m.kind.Handoff == nil || m.cfg.HandoffLimit < 0 || o.count != 1 || len(o.held) != 1 || len(o.waiting) != 0 ||
		len(m.queue) == 0 || m.att.req != nil {
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
	o.op.start(opHandoff, m.id(), r, 1, now)
	m.stopRenewal(o)
	m.streak++
	m.att = attempt{op: o.op.id, req: h, sent: now, handoff: true}
	m.call(o.op.id, m.kind.Handoff(m.env, o.field, &h.Request), h.Field, o.field)
}

// handoffReply settles both halves of a handoff. The release half is
// settled as a release's reply would be; if the call may not have run, it
// is repeated as a plain release (the acquire half, ambiguous then, is
// learned by the waiter's next attempt, which answers a grant that already
// ran).
func (m *Machine) handoffReply(now time.Time, o *owner, msg Msg) {
	var (
		left int64
		res  AcquireResult
	)
	if msg.Fault == NoFault {
		var err error
		if left, res, err = m.kind.DecodeHandoff(msg.Reply); err != nil {
			msg.Fault, msg.Err = Transient, err
		}
	}
	o.op.kind = opRelease
	m.releaseReply(now, o, msg, left)
	if msg.Op == m.att.op && m.att.req != nil {
		m.attemptReply(now, msg, res)
	}
}

// yieldTurn makes this client's waiters wait for the announcement of the
// release just made (or the subscription that lets them hear the next),
// so that they compete for the lock with other processes' waiters on equal
// terms instead of taking it straight back.
func (m *Machine) yieldTurn(now time.Time) {
	m.subscribe(m.queue[0])
	m.blockFor(now, m.cfg.Backoff)
}

// repeatOp sends the owner's op again with the same arguments.
func (m *Machine) repeatOp(o *owner) {
	o.op.id = m.id()
	o.op.retried = true
	if o.op.kind == opAcquire {
		m.call(o.op.id, m.kind.Acquire(m.env, &o.op.req.Request, o.op.expected), o.field, o.field)
		return
	}
	m.call(o.op.id, m.kind.Release(m.releaseEnv(o), o.field, o.op.expected), "", o.field)
}

// undo removes a grant that may have happened for field, in the background.
func (m *Machine) undo(now time.Time, field string, count int64, until time.Time) {
	if o := m.ownerOf(field); o != nil {
		// The owner is busy in Redis already; its own ops settle the count.
		return
	}
	if m.att.req != nil && m.att.req.Field == field {
		// Another request of the field is trying for the lock: its fresh
		// acquire answers a grant that may have happened as its own (count
		// 1 is expected + 1), and it settles the field like any attempt.
		// A release now could run after that acquire and take its grant.
		return
	}
	o := m.newOwner(field, count, 0)
	o.undo, o.undoUntil = true, until
	m.startRelease(now, o, nil, count)
}

// ErrReleaseUnconfirmed is an interim answer to a Release (EffReleaseDone,
// before the one that settles it): no release call succeeded within
// Config.ReleaseBound (the node is down, or silent past the call's timeout),
// renewal has stopped, and the release is repeated until Redis confirms it
// or the lease runs out.
var ErrReleaseUnconfirmed = errors.New("holdfast: release not confirmed yet (repeated in the background; without it the lease runs out)")

func (m *Machine) releaseReply(now time.Time, o *owner, msg Msg, left int64) {
	r := o.op.req
	if msg.Fault == Ambiguous {
		o.op.unsure = true
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
		if r != nil && r.releaseAsked && !r.unconfirmed {
			bound := r.releaseAt.Add(m.cfg.ReleaseBound)
			if now.Before(bound) {
				// Within the bound, tries go on, the last one at the bound:
				// a node back from a restart, or a failover that is over,
				// confirms in time.
				d := o.op.backoff
				m.opBackoff(now, o)
				if now.Add(d).After(bound) {
					m.schedule(TimerOpRetry, o.gen, bound)
				}
				return
			}
			// Not confirmed within the bound: say so now (the answer that
			// settles the Release still follows), so that no caller waits a
			// lease for a node that is down.
			r.unconfirmed = true
			m.emit(Effect{Kind: EffReleaseDone, ID: r.ID, Err: fmt.Errorf("%w: %w", ErrReleaseUnconfirmed, msg.Err)})
		}
		m.opBackoff(now, o)
		return
	}
	if msg.Fault == Permanent {
		m.releaseSettled(now, o, r, 0, msg.Err)
		return
	}
	o.op.backoff = m.cfg.Backoff
	switch {
	case left >= 0:
		m.releaseSettled(now, o, r, left, nil)
	case left == scripts.ReleaseNotOwner && (o.undo || o.op.retried && o.op.expected <= 1):
		m.releaseSettled(now, o, r, 0, nil)
	case left == scripts.ReleaseNotOwner:
		m.releaseSettled(now, o, r, 0, ErrNotOwner)
	default:
		m.releaseSettled(now, o, r, 0, fmt.Errorf("%w: Redis shows another reentry count than this client expected (%d)", ErrNotOwner, o.op.expected))
	}
}

// releaseSettled applies the outcome of a release op: the owner's count is now
// left, and err (if any) says the hold was not ours any more.
func (m *Machine) releaseSettled(now time.Time, o *owner, r *request, left int64, err error) {
	o.op.kind, o.op.req = opNone, nil
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
		if o.yield && err == nil && m.shutdown == nil && len(m.queue) > 0 && m.att.req == nil && !m.blocked {
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

// releaseEnv is the Env of a release call of o: it says whether this
// client's own requests wait on the name, so that the release is announced
// to them even when no other process marked itself waiting, and lends the
// call o's place for its arguments.
func (m *Machine) releaseEnv(o *owner) Env {
	env := m.env
	env.Waiters = len(m.queue) > 0
	env.args = &o.releaseArgs
	return env
}
