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

// placeAll sends one place call for the waiters without a place, in their
// local order, so that a crowd takes its places in one round trip. It does
// not wait for the place calls (or the head's attempt) already in flight:
// a waiter must reach Redis's queue as soon as it asks, or a call lost on
// its way (a partition, a failover) would hold back every later waiter of
// the client until it timed out. Calls on one connection run in the order
// they were sent, so the places still follow the local order; when they do
// not (a call repeated after a failure), Redis's order is the one that
// counts, and any waiter may be granted (see keepAliveReply).
func (m *Machine) placeAll(now time.Time) {
	if m.kind.Place == nil || m.shutdown != nil {
		return
	}
	var batch []*Request
	var op uint64
	for _, r := range m.queue {
		if r.placed || r.tryOnce || r.ending || r == m.att.req || r.placeOp != 0 || r.placeFailed ||
			!m.queues(r) || m.fieldQueued(r) || (r.gone && m.releasing()) || m.fieldUndoing(r.Field) {
			continue
		}
		if op == 0 {
			op = m.id()
		}
		r.placeOp = op
		r.ambiguous = true // from now on a place may exist for r
		batch = append(batch, &r.Request)
	}
	if op != 0 {
		m.call(op, m.kind.Place(m.env, batch), "", "")
	}
}

// fieldUndoing reports whether an undo of field (the place or grant of an
// earlier request of the field that gave up) is still on its way or to be
// repeated: a place taken meanwhile could be the one that undo removes, when
// a repeat of it runs after the place call.
func (m *Machine) fieldUndoing(field string) bool {
	o := m.ownerOf(field)
	return (o != nil && o.undo) || m.fieldBusy(field)
}

// releasing reports whether a release of this client's is on its way to
// Redis: a head whose place is gone tries once it is answered (a place
// call meanwhile would only cost it a round trip on a grant it has).
func (m *Machine) releasing() bool {
	for _, o := range m.owners {
		if o.op.kind == opRelease || o.op.kind == opHandoff {
			return true
		}
	}
	return false
}

// fieldQueued reports whether another waiter of r's owner field has the
// field's place in Redis (a place belongs to the field): r needs none of
// its own while that waiter keeps it. A place call of the field still in
// flight does not count: it may be lost, and placing a field again keeps
// its turn.
func (m *Machine) fieldQueued(r *request) bool {
	for _, q := range m.queue {
		if q != r && q.Field == r.Field && q.placed {
			return true
		}
	}
	return false
}

// behind returns the owner fields of the live waiters queued behind the
// head r that keep places in Redis (Env.Behind).
func (m *Machine) behind(r *request) []string {
	var fields []string
	for _, q := range m.queue {
		if q != r && q.Field != r.Field && !q.tryOnce && !q.ending && m.queues(q) {
			fields = append(fields, q.Field)
		}
	}
	return fields
}

// queues reports whether r keeps a place in Redis while it waits.
func (m *Machine) queues(r *request) bool {
	return m.kind.KeepAlive != nil && (m.kind.Queues == nil || m.kind.Queues(&r.Request))
}

// placeReply settles a place call for every request it carried.
func (m *Machine) placeReply(now time.Time, msg Msg, res AcquireResult) {
	var rs []*request
	for _, r := range m.queue {
		if r.placeOp == msg.Op {
			rs = append(rs, r)
		}
	}
	for _, r := range rs {
		m.placeSettled(now, r, msg, res)
	}
}

// placeSettled applies a place call's outcome to one request.
func (m *Machine) placeSettled(now time.Time, r *request, msg Msg, res AcquireResult) {
	r.placeOp = 0
	if r.ending {
		m.removeWaiting(r)
		m.undoFor(now, r, m.undoHorizon(now, r))
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
		r.heard = true
		m.setPlaced(now, r)
		if m.att.req == nil && !m.blocked && !m.unheard {
			// Placed waiters wait for their grant's message (or the
			// holder's TTL), not for the local holder's release: trying
			// at that release would only find them queued. A message
			// that came before this reply is not lost (unheard).
			m.subscribe(r)
			m.blockFor(now, m.refusedSleep(r, res.PTTL))
		}
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
	if !m.keepAliveArmed {
		m.scheduleKeepAlive(now)
	}
}

func (m *Machine) scheduleKeepAlive(now time.Time) {
	m.keepAliveArmed = true
	m.schedule(TimerKeepAlive, 0, now.Add(m.cfg.WaiterTimeout/3))
}

// unqueue stops keeping r's place (it was granted, or it ended and its
// place is released by an undo). The keep-alive timer, when it next fires
// and finds no place left, stops by itself.
func (m *Machine) unqueue(r *request) {
	r.keepOp, r.placeOp, r.placeFailed, r.placed = 0, 0, false, false
}

// keepAlive renews every place, and lets failed place calls repeat.
func (m *Machine) keepAlive(now time.Time) {
	m.keepAliveArmed = false
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
// queue tries again at once, which confirms a grant (its own, or one that
// Redis gave another waiter of this client, see Kind.Place) or queues it
// anew; another waiter takes a new place. The head tries even while this
// client holds the name (probe): Redis grants a waiter only a free name, so
// a hold a failover rolled back ends then, not at its deadline.
func (m *Machine) keepAliveReply(now time.Time, r *request, msg Msg) {
	r.keepOp = 0
	if msg.Fault != NoFault || msg.Renewed {
		// A failed keep-alive is repeated at the next tick, well within
		// WaiterTimeout.
		return
	}
	m.unqueue(r)
	if len(m.queue) > 0 && m.queue[0] == r {
		r.gone = true
		if len(m.owners) > 0 {
			m.probe = true // granted, perhaps, past a hold a failover lost
		}
		m.wake(now)
	}
}

// settleStrays releases the places that the answered place call op may
// have left for requests that gave up while it was in flight (whatever its
// outcome: a call that failed may have run).
func (m *Machine) settleStrays(now time.Time, op uint64) {
	keep := m.strays[:0]
	var done []string
	for _, c := range m.strays {
		if c.op == op {
			done = append(done, c.field)
			continue
		}
		keep = append(keep, c)
	}
	m.strays = keep
	for _, field := range done {
		if !m.fieldWaits(field) {
			m.undo(now, field, 1, now.Add(m.cfg.WaiterTimeout))
		}
	}
}

// undoHorizon is how long an undo of what request r may have left in Redis
// keeps trying, from when its last call was sent: a grant lasts its lease,
// and a place in Redis's queue WaiterTimeout from its last place or
// keep-alive, while nobody keeps it alive (a grant Redis made to the place
// waits for its confirmation as long). An undo that stopped before the place
// lapsed would leave the place to the next request of its owner field,
// which takes it over with its old turn, and a grant made to it, ahead of
// the waiters of other clients queued behind.
func (m *Machine) undoHorizon(from time.Time, r *request) time.Time {
	d := r.Lease
	if m.queues(r) {
		d = max(d, m.cfg.WaiterTimeout)
	}
	return from.Add(d)
}

// undoFor undoes what the pending request r, which gives up, may have left
// in Redis (a place, or a grant of its field). With a queue in Redis, a
// place belongs to the owner field, not the request: while another
// pending request of the same field waits, the place is still its own.
func (m *Machine) undoFor(now time.Time, r *request, until time.Time) {
	if m.kind.KeepAlive != nil {
		for _, q := range m.queue {
			if q != r && q.Field == r.Field && q.state == statePending && !q.ending {
				return
			}
		}
	}
	m.undo(now, r.Field, 1, until)
}
