package lockactor

import (
	"fmt"
	"slices"
	"time"
)

// Chapter 3, holding: owners (one per owner field with a hold in Redis),
// their reentries, validity deadlines and watchdog renewals, and the loss
// of a hold.

func (m *Machine) newOwner(field string, count int64, token uint64) *owner {
	if prev := m.ownerOf(field); prev != nil {
		prev.current = false
	}
	o := m.spare // zeroed by Machine.recycle
	if o != nil {
		m.spare = nil
	} else {
		o = new(owner)
	}
	o.gen, o.field, o.count, o.token, o.current = m.id(), field, count, token, true
	o.op.backoff = m.cfg.Backoff
	o.held, o.waiting = o.heldBuf[:0], o.waitBuf[:0]
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
	m.extendDeadline(o, Validity(sent, r.Lease))
	if r.Watchdog && !o.watchdog {
		o.watchdog = true
		o.renewNext = firstRenewal(sent, r.Lease)
		m.schedule(TimerRenew, o.gen, o.renewNext)
	}
	r.granted = true
	m.emit(Effect{Kind: EffAcquired, ID: r.ID, Token: o.token, At: o.deadline})
}

// extendDeadline moves owner o's validity deadline to d when d is later,
// and tells each holder already told of a deadline. A deadline never moves
// back: a shorter lease taken inside a longer one cannot cut it (the
// scripts only ever extend a TTL).
func (m *Machine) extendDeadline(o *owner, d time.Time) {
	if !d.After(o.deadline) {
		return
	}
	o.deadline = d
	m.schedule(TimerDeadline, o.gen, d.Add(-m.cfg.Slack))
	for _, h := range o.held {
		if h.granted {
			m.emit(Effect{Kind: EffDeadline, ID: h.ID, At: d})
		}
	}
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

func (m *Machine) reentryReply(now time.Time, o *owner, msg Msg, res AcquireResult) {
	r := o.op.req
	o.op.kind, o.op.req = opNone, nil
	switch msg.Fault {
	case Transient, Demoted:
		if r.ending || r.tryOnce {
			// Gave up, or tried once: the failed call is its answer.
			err := r.endErr
			if !r.ending {
				err = withLast(ErrWaitTimeout, "last error", msg.Err)
			}
			m.finish(r, err)
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
		o.op.kind, o.op.req, o.op.unsure = opAcquire, r, true
		m.opBackoff(now, o)
		if r.tryOnce {
			// A try-once ends now (with its cause, if it gave up before);
			// the repeat settles its call in the background (a reentry it
			// made is given back).
			err := r.endErr
			if !r.ending {
				err = withLast(ErrWaitTimeout, "last error", msg.Err)
			}
			m.giveUp(now, r, err)
		}
		return
	case Permanent:
		o.waiting = append([]*request{r}, o.waiting...)
		m.ownerLost(now, o, msg.Err)
		return
	}
	o.op.backoff = m.cfg.Backoff
	switch {
	case res.Code == Granted && res.Count == o.op.expected+1 &&
		(m.kind.HoldToken && res.Token != o.token || res.Token < o.token):
		// The reentry joined another hold of this field: this owner's hold
		// is gone. Its holders are told, and the hold the reentry joined,
		// which no holder here uses, is given back whole. A kind whose
		// reply is the hold's own token tells by any difference; the
		// others answer the fence counter, never below a live hold's token,
		// so a lower one means a roll-back (a failover) lost this owner's
		// grant and left an older hold of the same field in its place: a
		// later grant would be given this hold's token again.
		o.waiting = append([]*request{r}, o.waiting...)
		m.ownerLost(now, o, fmt.Errorf("%w: Redis holds this owner's field under token %d, not this hold's %d (a failover brought back an older hold)", ErrNotOwner, res.Token, o.token))
		stray := m.newOwner(o.field, res.Count, res.Token)
		stray.undo, stray.undoUntil = true, o.op.sent.Add(r.Lease)
		m.startRelease(now, stray, nil, 0)
		return
	case res.Code == Granted && res.Count == o.op.expected+1:
		o.count = res.Count
		if r.ending {
			// Gave up while its reentry was in flight: the count it added
			// is given back.
			r.state = stateHeld
			r.owner = o
			o.held = append(o.held, r)
			m.askRelease(now, r)
			if r.tryOnce {
				// A try-once is decided by its one call: it ends now, and
				// its give-back goes on in the background (as after an
				// ambiguous call, above), so a release that fails or
				// times out does not keep it pending.
				m.finish(r, r.endErr)
			}
		} else {
			m.grant(now, o, r, o.op.sent)
		}
	case res.Code == Refused:
		// The kind refuses this reentry (a reader asking to write): the
		// request ends, the owner's hold is untouched.
		m.finish(r, res.Err)
	case res.Code == Mismatch && res.Count == 0:
		// The owner's hold is gone from Redis.
		o.waiting = append([]*request{r}, o.waiting...)
		m.ownerLost(now, o, ErrNotOwner)
		return
	default:
		o.waiting = append([]*request{r}, o.waiting...)
		m.ownerLost(now, o, fmt.Errorf("%w: Redis shows reentry count %d where this client expected %d", ErrNotOwner, res.Count, o.op.expected))
		return
	}
	m.nextOp(now, o)
}

func (m *Machine) opBackoff(now time.Time, o *owner) {
	d := o.op.backoff
	o.op.backoff = min(2*o.op.backoff, m.cfg.MaxBackoff)
	if o.op.kind == opNone {
		// Nothing to repeat; the waiting queue restarts after the delay.
		o.op.kind = opAcquire
		o.op.req = o.waiting[0]
		o.waiting = o.waiting[1:]
		o.op.expected = o.count
	}
	m.schedule(TimerOpRetry, o.gen, now.Add(d))
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
	for _, w := range append(o.waiting, o.op.req) {
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
	o.waiting, o.op.req, o.op.kind = nil, nil, opNone
	if len(back) > 0 {
		m.queue = append(back, m.queue...)
	}
	m.dropped = o
}

func (m *Machine) stopRenewal(o *owner) {
	if o.watchdog {
		o.watchdog = false
		m.cancelTimer(TimerRenew, o.gen)
	}
}

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
