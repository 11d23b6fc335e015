package lockactor

import "time"

// Places in a queue kept by Redis (Kind.KeepAlive). The head request of the
// local queue is the only one with an attempt, so it is the only one with a
// place: the machine keeps that place alive every WaiterTimeout/3, the way
// the watchdog keeps holds, and a process that dies stops doing so, which
// lets its place lapse after WaiterTimeout.

// keepPlace notes that r holds a place in Redis's queue and keeps it alive.
func (m *Machine) keepPlace(now time.Time, r *request) {
	if m.queued == r {
		return
	}
	m.unqueue(m.queued)
	m.queued = r
	m.schedule(TimerKeepAlive, 0, now.Add(m.cfg.WaiterTimeout/3))
}

// unqueue stops keeping r's place (it was granted, or it ended and its
// place is released by an undo).
func (m *Machine) unqueue(r *request) {
	if r == nil || m.queued != r {
		return
	}
	m.queued, m.keepOp = nil, 0
	m.cancelTimer(TimerKeepAlive, 0)
}

// keepAlive renews the place of the queued request.
func (m *Machine) keepAlive(now time.Time) {
	r := m.queued
	if r == nil || r.state != statePending {
		return
	}
	m.schedule(TimerKeepAlive, 0, now.Add(m.cfg.WaiterTimeout/3))
	if m.keepOp != 0 {
		return // the last one is still in flight
	}
	m.keepOp = m.id()
	m.emit(Effect{Kind: EffRenew, Op: m.keepOp, Script: m.kind.KeepAlive, Key: m.kind.KeepAliveKey(m.env.Name),
		Field: r.Field, Lease: m.cfg.WaiterTimeout})
}

// keepAliveReply settles a keep-alive. A place that is gone was granted
// (and the grant's message may be lost) or lapsed: either way the waiter
// tries again at once, which confirms a grant or queues it anew.
func (m *Machine) keepAliveReply(now time.Time, msg Msg) {
	m.keepOp = 0
	switch {
	case msg.Fault == NoFault && !msg.Renewed:
		m.wake(now)
	case msg.Fault != NoFault:
		// Try again soon: the place lapses only after WaiterTimeout.
		m.schedule(TimerKeepAlive, 0, now.Add(min(m.cfg.Backoff, m.cfg.WaiterTimeout/3)))
	}
}
