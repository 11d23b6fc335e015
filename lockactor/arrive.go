package lockactor

import (
	"fmt"
	"slices"
	"time"
)

// Chapter 1, arrival and queueing: a Lock call becomes a request, queued
// behind the others (or parked while Redis has not said which kind the
// name is); a request ends once, with finish, whatever ends it.

func (m *Machine) enqueue(now time.Time, req Request) {
	r := m.spareReq // zeroed by Machine.recycle
	if r != nil {
		m.spareReq = nil
	} else {
		r = new(request)
	}
	*r = request{Request: req, tryOnce: req.Wait == 0}
	m.reqs = append(m.reqs, r)
	if m.shutdown != nil {
		m.finish(r, m.shutdown)
		return
	}
	if req.Wait > 0 {
		m.schedule(TimerWait, uint64(req.ID), now.Add(req.Wait))
	}
	if k := kindOf(&req); k != m.kind {
		if len(m.reqs) > 1 || len(m.owners) > 0 || m.att.req != nil {
			if m.kindKnown() {
				// In use as another kind, which Redis refuses too.
				m.finish(r, m.otherKind(r))
				return
			}
			// Busy as another kind that Redis has not confirmed yet: the
			// name may well be r's kind (the other requests' answer will
			// tell). r waits aside until then (see unpark); a try-once
			// request cannot try now, and ends as behind an attempt in
			// flight.
			if r.tryOnce {
				m.finish(r, ErrWaitTimeout)
				return
			}
			m.parked = append(m.parked, r)
			return
		}
		m.kind = k
	}
	m.admit(now, r)
}

// admit queues request r of the machine's kind: as a reentry of its owner's
// hold, at the front (Kind.Jump) or at the back of the local queue.
func (m *Machine) admit(now time.Time, r *request) {
	if o := m.ownerOf(r.Field); o != nil && !o.undo {
		if r.tryOnce && (o.op.kind != opNone || len(o.waiting) > 0) {
			// A try-once reentry behind its owner's call in flight (whose
			// retries the owner may wait for) cannot try now: it ends, as
			// a fresh one behind an attempt in flight does.
			m.finish(r, ErrWaitTimeout)
			return
		}
		o.waiting = append(o.waiting, r)
		m.nextOp(now, o)
		return
	}
	if m.kind.Jump != nil && m.kind.Jump(&r.Request, m.holds) {
		m.queue = append([]*request{r}, m.queue...)
		m.wake(now)
		return
	}
	m.queue = append(m.queue, r)
}

// kindKnown reports whether Redis has confirmed that the name is in use as
// the machine's kind: this client holds it, or a request of the kind was
// told to wait (a name in use as another kind refuses instead).
func (m *Machine) kindKnown() bool {
	if len(m.owners) > 0 {
		return true
	}
	for _, r := range m.queue {
		if r.heard {
			return true
		}
	}
	return false
}

// otherKind is the error request r of another kind than the machine's ends
// with once Redis confirmed the machine's kind: ErrWrongKind, or ErrPermits
// for a semaphore of another permit count.
func (m *Machine) otherKind(r *request) error {
	if kindOf(&r.Request).Name == m.kind.Name && m.kind.Permits > 0 {
		return fmt.Errorf("%w: it has %d permits", ErrPermits, m.kind.Permits)
	}
	return ErrWrongKind
}

// unpark decides the requests parked behind requests of another kind: once
// Redis confirmed that kind they end with ErrWrongKind, as Redis would
// refuse them; once every request of that kind is over without it (refused
// as the wrong kind, cancelled…), the first parked request's kind becomes
// the machine's, and the parked requests of that kind are queued.
func (m *Machine) unpark(now time.Time) {
	if len(m.parked) == 0 {
		return
	}
	if m.kindKnown() {
		for _, r := range slices.Clone(m.parked) {
			m.finish(r, m.otherKind(r))
		}
		return
	}
	if len(m.reqs) > len(m.parked) || len(m.owners) > 0 || m.att.req != nil {
		return
	}
	m.unsubscribe() // the other kind's channel
	m.kind = kindOf(&m.parked[0].Request)
	keep := m.parked[:0]
	var admit []*request
	for _, r := range m.parked {
		if kindOf(&r.Request) == m.kind {
			admit = append(admit, r)
		} else {
			keep = append(keep, r)
		}
	}
	m.parked = keep
	for _, r := range admit {
		m.admit(now, r)
	}
}

// end makes request r give up (pending) or release (held) and end with err.
func (m *Machine) end(now time.Time, r *request, err error) {
	switch r.state {
	case statePending:
		if o := m.ownerOf(r.Field); r == m.att.req || r.placeOp != 0 || (o != nil && o.op.req == r) {
			// The outcome of its acquire is in flight; decide when it lands.
			r.ending, r.endErr = true, err
			return
		}
		m.removeWaiting(r)
		if r.ambiguous && r.owner == nil {
			m.undoFor(now, r, m.undoHorizon(now, r))
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
		if r.placeOp != 0 && r != m.att.req {
			m.strays = append(m.strays, fieldCall{r.placeOp, r.Field})
		}
		m.removeWaiting(r)
		m.finish(r, err)
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
	if j := slices.Index(m.parked, r); j >= 0 {
		m.parked = slices.Delete(m.parked, j, j+1)
	}
	if r.Wait > 0 {
		m.cancelTimer(TimerWait, uint64(r.ID))
	}
	m.unqueue(r)
	if r.releaseAsked {
		var rerr error
		if r.state != statePending && err != ErrReleased {
			rerr = err
		}
		m.answerRelease(r, rerr)
	}
	m.emit(Effect{Kind: EffLost, ID: r.ID, Err: err})
	m.droppedReq = r
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
			if m.queues(r) {
				// A place in Redis belongs to the owner field: a later
				// request of the same field keeps it (undoFor), so it takes
				// r's turn here too, and the local order stays the order of
				// the places (the head is the one that confirms a grant).
				for j := i + 1; j < len(m.queue); j++ {
					if s := m.queue[j]; s.Field == r.Field && s.state == statePending && !s.ending {
						copy(m.queue[i+1:j+1], m.queue[i:j])
						m.queue[i] = s
						m.queue = append(m.queue[:i+1], m.queue[i+2:]...)
						return
					}
				}
			}
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
