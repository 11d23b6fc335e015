package lockactor

import (
	"fmt"
	"slices"
	"time"
)

// Timers and shutdown: what the wheel and Close bring to the machine.

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
			m.emit(renewEffect(m.kind, o.gen, m.env.Name, o.field, o.lease, o.token))
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
		if len(m.queue) > 0 {
			// The hold ends in Redis at its expiry, unreleased, and nobody
			// announces that: the head of the local queue tries then (a
			// placed head would otherwise wait for its retry timer).
			m.blocked, m.unheard = true, false
			m.schedule(TimerRetry, 0, o.deadline.Add(Drift(o.lease)))
		}
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
