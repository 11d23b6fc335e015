package lockactor

import "time"

// Places in a queue kept by Redis (Kind.KeepAlive). Every pending request
// of such a kind takes a place when it arrives (Kind.Place), so that Redis
// orders the waiters of all clients by arrival; the head of the local queue
// is the one that tries for the lock and confirms a grant (Kind.Acquire).
// The machine keeps every place alive every WaiterTimeout/3, the way the
// watchdog keeps holds, and a process that dies stops doing so, which lets
// its places lapse after WaiterTimeout. A request that gives up releases
// its place (it is marked ambiguous, so ending it undoes).

// placeAll sends a place call for each waiter that has none yet.
func (m *Machine) placeAll(now time.Time) {
	if m.kind.Place == nil || m.shutdown != nil {
		return
	}
	for _, r := range m.queue {
		if r.placed || r.placeOp != 0 || r.placeFailed || r.tryOnce || r.ending || r == m.att.req {
			continue
		}
		r.placeOp = m.id()
		r.ambiguous = true // from now on a place may exist for r
		m.call(r.placeOp, m.kind.Place(m.env, &r.Request), "", "")
	}
}

// placeReply settles a place call.
func (m *Machine) placeReply(now time.Time, r *request, msg Msg, res AcquireResult) {
	r.placeOp = 0
	if r.ending {
		m.removeWaiting(r)
		m.undo(now, r.Field, 1, now.Add(m.cfg.WaiterTimeout))
		m.finish(r, r.endErr)
		return
	}
	switch {
	case msg.Fault == Permanent:
		m.removeWaiting(r)
		m.finish(r, msg.Err)
	case msg.Fault != NoFault:
		// Repeated at the next keep-alive tick.
		r.placeFailed = true
		m.scheduleKeepAlive(now)
	case res.Code == Refused:
		m.removeWaiting(r)
		m.finish(r, res.Err)
	case res.Code == Held:
		m.setPlaced(now, r)
	default:
		// A place call never takes the lock; anything else means the owner
		// field is in use in Redis already: the head's attempt will tell.
		r.placeFailed = true
		m.scheduleKeepAlive(now)
	}
}

// setPlaced notes that r has a place, and keeps it alive.
func (m *Machine) setPlaced(now time.Time, r *request) {
	if r.placed {
		return
	}
	r.placed = true
	m.places++
	if m.places == 1 {
		m.scheduleKeepAlive(now)
	}
}

func (m *Machine) scheduleKeepAlive(now time.Time) {
	m.schedule(TimerKeepAlive, 0, now.Add(m.cfg.WaiterTimeout/3))
}

// unqueue stops keeping r's place (it was granted, or it ended and its
// place is released by an undo).
func (m *Machine) unqueue(r *request) {
	r.keepOp, r.placeFailed = 0, false
	if !r.placed {
		return
	}
	r.placed = false
	m.places--
	if m.places == 0 {
		m.cancelTimer(TimerKeepAlive, 0)
	}
}

// keepAlive renews every place, and lets failed place calls repeat.
func (m *Machine) keepAlive(now time.Time) {
	again := false
	for _, r := range m.queue {
		if r.placeFailed {
			r.placeFailed = false
			continue
		}
		if !r.placed || r.state != statePending {
			continue
		}
		again = true
		if r.keepOp != 0 {
			continue // the last one is still in flight
		}
		r.keepOp = m.id()
		m.emit(Effect{Kind: EffRenew, Op: r.keepOp, Script: m.kind.KeepAlive, Key: m.kind.KeepAliveKey(m.env.Name),
			Field: r.Field, Lease: m.cfg.WaiterTimeout})
	}
	if again {
		m.scheduleKeepAlive(now)
	}
}

// keepAliveReply settles a keep-alive. A place that is gone was granted
// (and the grant's message may be lost) or lapsed: the head of the local
// queue tries again at once, which confirms a grant or queues it anew;
// another waiter takes a new place.
func (m *Machine) keepAliveReply(now time.Time, r *request, msg Msg) {
	r.keepOp = 0
	if msg.Fault != NoFault || msg.Renewed {
		// A failed keep-alive is repeated at the next tick, well within
		// WaiterTimeout.
		return
	}
	m.unqueue(r)
	if len(m.queue) > 0 && m.queue[0] == r {
		m.wake(now)
	}
}
