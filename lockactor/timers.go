package lockactor

import (
	"fmt"
	"slices"
	"time"
)

// Renewal, timers and shutdown.

func (m *Machine) renewReply(now time.Time, msg Msg) {
	for _, r := range m.queue {
		if r.keepOp == msg.Op {
			m.keepAliveReply(now, r, msg)
			return
		}
	}
	o := m.ownerGen(msg.Op)
	if o == nil {
		return
	}
	o.renewInFlight = false
	if !o.watchdog {
		return
	}
	switch {
	case msg.Fault == Demoted:
		// Waiting out the lease would leave this hold believed while the new
		// primary may grant the lock elsewhere.
		m.ownerLost(now, o, fmt.Errorf("%w: renewal refused: %v", ErrFailover, msg.Err))
	case msg.Fault == Permanent:
		m.ownerLost(now, o, msg.Err)
	case msg.Fault == NoFault && !msg.Renewed:
		m.ownerLost(now, o, ErrNotOwner)
	case msg.Fault != NoFault:
		o.renewErr = msg.Err
		// Try again soon; the deadline timer ends the hold if none succeeds.
		if retry := now.Add(m.cfg.Backoff); retry.Before(o.renewNext) {
			m.schedule(TimerRenew, o.gen, retry)
		}
	default:
		o.renewErr = nil
		m.extendDeadline(o, Validity(msg.Sent, o.renewLease))
	}
}

// --- timers ---

func (m *Machine) timer(now time.Time, k TimerKey) {
	switch k.Kind {
	case TimerWait:
		if r := m.req(ReqID(k.ID)); r != nil && r.state == statePending {
			m.giveUp(now, r, withLast(ErrWaitTimeout, "last error", m.attemptErr))
		}
	case TimerRetry:
		// The head's sleep is over: it tries, placed or not.
		m.blocked, m.unheard = false, true
	case TimerRenew:
		o := m.ownerGen(k.ID)
		if o == nil || !o.watchdog {
			return
		}
		o.renewNext = renewalAfter(o.renewNext, now, o.lease)
		m.schedule(TimerRenew, o.gen, o.renewNext)
		if !o.renewInFlight {
			o.renewInFlight, o.renewLease = true, o.lease
			m.emit(renewEffect(m.kind, o.gen, m.env.Name, o.field, o.lease))
		}
	case TimerDeadline:
		o := m.ownerGen(k.ID)
		if o == nil {
			return
		}
		if o.undo {
			return
		}
		// The hold may still be live in Redis for Slack+drift, but no renewal
		// confirmed it: it is lost now, before anyone else can be granted it.
		err := withLast(ErrLeaseExpired, "last renewal error", o.renewErr)
		for _, h := range o.held {
			m.answerRelease(h, err)
		}
		if o.op.kind != opNone {
			// Let the op's reply be dropped: the owner is gone.
			o.op.id = 0
		}
		m.ownerLost(now, o, err)
	case TimerOpRetry:
		o := m.ownerGen(k.ID)
		if o == nil || o.op.kind == opNone {
			return
		}
		if o.op.kind == opAcquire && o.op.req != nil && !o.op.unsure && o.op.req.ending {
			// A transient failure for a request that has given up: drop it.
			r := o.op.req
			o.op.kind, o.op.req = opNone, nil
			m.finish(r, r.endErr)
			m.nextOp(now, o)
			return
		}
		if o.op.kind == opAcquire {
			o.op.sent = now
		}
		m.repeatOp(o)
	case TimerKeepAlive:
		m.keepAlive(now)
	}
}

// --- shutdown ---

func (m *Machine) close(now time.Time, err error) {
	if m.shutdown != nil {
		return
	}
	m.shutdown = err
	for _, r := range slices.Clone(m.parked) {
		m.finish(r, err)
	}
	for _, r := range append([]*request(nil), m.queue...) {
		m.end(now, r, err)
	}
	// In the order of creation, so that a run is reproducible.
	for _, o := range slices.Clone(m.owners) {
		if o.op.req != nil && o.op.req.state == statePending {
			o.op.req.ending, o.op.req.endErr = true, err
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

// withLast returns cause, wrapping last (the Redis error behind it) if any.
func withLast(cause error, what string, last error) error {
	if last == nil {
		return cause
	}
	return fmt.Errorf("%w: %s: %w", cause, what, last)
}
