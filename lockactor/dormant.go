package lockactor

import (
	"math"
	"time"

	"github.com/holdfast/holdfast/scripts"
)

// Dormant is a quiet machine folded into a record a few hundred bytes
// smaller than the machine: one request holding the lock, nothing waiting,
// nothing in flight but perhaps its renewal. A client holding a hundred
// thousand locks for minutes keeps, per lock, this record and a timer
// instead of a machine and an actor.
//
// The runtime keeps the record in place of the machine (Machine.Sleep) and
// drives it with the record's own timer (Due, Fire) and the replies of the
// renewals it asks for (RenewReply). Everything else — a Release, a
// cancellation, a new request on the name, a failed renewal, the validity
// deadline, shutdown — needs the machine: the runtime rebuilds it with Wake
// and steps it with that input as it would have stepped the machine that
// slept. A Dormant has one owner, like a Machine.
//
// The record keeps its deadline as an offset from an epoch, a time the
// runtime took from its clock once and passes to every method that needs
// the deadline (Sleep, Deadline, Due, Fire, RenewReply, Wake): one
// time.Time per runtime rather than one per record. The offset is a
// difference of two readings of the same clock, so with the real clock it
// is a difference of monotonic readings, as the machine's comparisons are:
// a step of the wall clock moves no deadline.
//
// Its fields are what the machine's state comes to when quiet, and no more
// (its kind is its request's; a renewal in flight asked for its lease):
// the runtime keeps one per held lock. The request's ID and owner field
// are not among them: Sleep gives them to the runtime, which passes them
// back (the actor runtime asks the Lock for them again, Giver, so a quiet
// hold keeps no string of its own). Two numbers are kept in four bytes
// each, and a machine whose numbers do not fit does not sleep: the lease
// in whole milliseconds, and the id counter as its distance above the
// owner's generation.
type Dormant struct {
	// The request holding the lock (its ID the runtime's); its Watchdog,
	// Mode and the sign of its Wait (all a granted request's Wait still
	// decides) are below.
	kind  *Kind
	gen   uint64 // the owner's generation: the Op of its renewals
	token uint64
	// nextIDs is the machine's id counter, so ids stay unique across a
	// sleep, less gen.
	nextIDs uint32
	// leaseMs is the owner's lease, and the request's, in milliseconds: a
	// machine whose request asked for another (a nested grant's longer
	// lease outlived it) does not sleep.
	leaseMs uint32
	// deadline is the hold's validity deadline, as an offset from the
	// runtime's epoch (see Dormant): a time.Time would take three times the
	// room, and the runtime's entry past its size class.
	deadline time.Duration
	// renewIn is when the next renewal is due, as an offset from the
	// deadline; zero without the watchdog.
	renewIn     time.Duration
	count       uint16 // the owner's reentry count in Redis (one, unless a reentry that gave up left more)
	mode        uint8  // the owner's
	reqMode     uint8
	wait        int8 // the sign of the request's Wait
	watchdog    bool // the owner's
	reqWatchdog bool
	renewing    bool // a renewal asked for by Fire is in flight
}

// Quiet reports whether the machine holds quietly: one request holding the
// lock through one owner, no other request, no queue, no call or
// subscription in flight, no failure being retried. Such a machine sleeps
// (Sleep) whenever its renewal is not in flight.
func (m *Machine) Quiet() bool {
	_, r := m.quietHold()
	return r != nil
}

// quietHold returns the owner and the request of a quiet machine (Quiet),
// or nils.
func (m *Machine) quietHold() (*owner, *request) {
	if len(m.reqs) != 1 || len(m.owners) != 1 || len(m.queue) != 0 || m.att.req != nil ||
		m.keepAliveArmed || m.sub != subNone || len(m.inflight) != 0 || len(m.strays) != 0 || m.shutdown != nil {
		return nil, nil
	}
	o, r := m.owners[0], m.reqs[0]
	if !o.current || o.undo || o.op.kind != opNone || len(o.waiting) != 0 || len(o.held) != 1 || o.held[0] != r ||
		o.renewErr != nil || o.yield {
		return nil, nil
	}
	if r.state != stateHeld || !r.granted || r.owner != o || r.releaseAsked || r.ending || r.ambiguous ||
		r.placed || r.placeOp != 0 || r.keepOp != 0 {
		return nil, nil
	}
	return o, r
}

// Sleep folds the machine into a Dormant when it is quiet (Quiet) and its
// renewal is not in flight. It reports false, and changes nothing,
// otherwise. After a successful Sleep the machine must not be used: its
// timers are replaced by the record's (Due), and its state lives on in the
// record. epoch is the time the record's deadline is kept from (see
// Dormant): a reading of the clock the machine is stepped with, the one
// the runtime passes to the record's every method. A deadline the offset
// cannot give back exactly (more than 292 years away, or a reading with
// a monotonic part when epoch has none, or the reverse) does not sleep.
// id and field are the request holding the lock and the owner field it
// holds through: Fire, RenewReply and Wake take them back. A lease that is
// not whole milliseconds (or past 49 days), or an id counter more than
// 2^32 ids past the owner's generation, does not sleep either.
func (m *Machine) Sleep(epoch time.Time) (d Dormant, id ReqID, field string, ok bool) {
	o, r := m.quietHold()
	if r == nil || o.renewInFlight {
		return Dormant{}, 0, "", false
	}
	if o.count != int64(uint16(o.count)) || r.Lease != o.lease {
		return Dormant{}, 0, "", false
	}
	if o.lease <= 0 || o.lease%time.Millisecond != 0 || o.lease/time.Millisecond > math.MaxUint32 ||
		m.nextID < o.gen || m.nextID-o.gen > math.MaxUint32 {
		return Dormant{}, 0, "", false
	}
	deadline, ok := offsetOf(o.deadline, epoch)
	if !ok {
		return Dormant{}, 0, "", false
	}
	d = Dormant{
		kind: r.Kind, reqMode: r.Mode, reqWatchdog: r.Watchdog,
		gen: o.gen, nextIDs: uint32(m.nextID - o.gen), token: o.token,
		leaseMs: uint32(o.lease / time.Millisecond), deadline: deadline,
		count: uint16(o.count), mode: o.mode, watchdog: o.watchdog,
	}
	switch {
	case r.Wait < 0:
		d.wait = -1
	case r.Wait > 0:
		d.wait = 1
	}
	if o.watchdog {
		d.renewIn = o.renewNext.Sub(o.deadline)
	}
	return d, r.ID, r.Field, true
}

// offsetOf is t as an offset from epoch, and whether epoch.Add of it gives
// t back: the same instant, read the same way (both with a monotonic
// reading, compared by it, or both without).
func offsetOf(t, epoch time.Time) (time.Duration, bool) {
	off := t.Sub(epoch)
	return off, epoch.Add(off).Equal(t) && hasMonotonic(t) == hasMonotonic(epoch)
}

// hasMonotonic reports whether t carries a monotonic clock reading, which
// Round(0) strips (t == t.Round(0) compares the readings, not the instants).
func hasMonotonic(t time.Time) bool { return t != t.Round(0) }

// request is the request d keeps, as Wake gives it back: its Wait is
// reduced to its sign.
func (d *Dormant) request(id ReqID, field string) Request {
	return Request{ID: id, Field: field, Lease: d.lease(), Wait: time.Duration(d.wait), Kind: d.kind,
		Watchdog: d.reqWatchdog, Mode: d.reqMode}
}

// deadlineAt is the hold's validity deadline, from epoch.
func (d *Dormant) deadlineAt(epoch time.Time) time.Time { return epoch.Add(d.deadline) }

// renewNext is when the next renewal is due (with the watchdog), from epoch.
func (d *Dormant) renewNext(epoch time.Time) time.Time { return epoch.Add(d.deadline + d.renewIn) }

// lease is the owner's lease.
func (d *Dormant) lease() time.Duration { return time.Duration(d.leaseMs) * time.Millisecond }

// Gen is the owner generation the record holds through: the Op of its
// renewals' effects and of the replies RenewReply takes.
func (d *Dormant) Gen() uint64 { return d.gen }

// Renewing reports whether a renewal Fire asked for is in flight: its
// reply, RenewReply's or the woken machine's, is still to come.
func (d *Dormant) Renewing() bool { return d.renewing }

// Deadline is the hold's validity deadline. epoch is the one Sleep was
// given, as for every method below.
func (d *Dormant) Deadline(epoch time.Time) time.Time { return d.deadlineAt(epoch) }

// Due is when the runtime must call Fire: the next renewal, or the moment
// the machine's deadline timer would fire. slack is the machine's
// Config.Slack.
func (d *Dormant) Due(epoch time.Time, slack time.Duration) time.Time {
	end := d.deadlineAt(epoch).Add(-slack)
	if next := d.renewNext(epoch); d.watchdog && !d.renewing && next.Before(end) {
		return next
	}
	return end
}

// Fire is the record's timer, called at Due or later, with the same slack. It returns the
// renewal to carry out (an EffRenew, answered by RenewReply), or, when the
// deadline timer is due, the message (wake.Kind != 0) to step the machine
// rebuilt by Wake with: the hold is lost unless a renewal made it in time,
// and that takes the machine. field is the one Sleep gave.
func (d *Dormant) Fire(epoch, now time.Time, name, field string, slack time.Duration) (renew Effect, wake Msg) {
	deadline := d.deadlineAt(epoch)
	if !now.Before(deadline.Add(-slack)) {
		return Effect{}, Msg{Kind: MsgTimer, Timer: TimerKey{TimerDeadline, d.gen}}
	}
	next := d.renewNext(epoch)
	if !d.watchdog || now.Before(next) {
		return Effect{}, Msg{}
	}
	d.renewIn = renewalAfter(next, now, d.lease()).Sub(deadline)
	if d.renewing {
		return Effect{}, Msg{}
	}
	d.renewing = true
	return renewEffect(d.kindOf(), d.gen, name, field, d.lease(), d.token), Msg{}
}

// RenewReply takes the reply to the renewal Fire asked for. A renewal that
// extended the lease is the record's to keep: it returns the EffDeadline
// to carry out if the deadline moved (Kind 0 if not). Any other outcome —
// the key lost, an error to retry or to end the hold with — is the
// machine's: wake reports that the runtime must rebuild it with Wake and
// step it with msg. So is a new deadline the record cannot keep from epoch
// (see Sleep): the machine keeps it. id is the one Sleep gave.
func (d *Dormant) RenewReply(epoch time.Time, id ReqID, msg Msg) (deadline Effect, wake bool) {
	if msg.Kind != MsgRenewReply || msg.Op != d.gen || !d.renewing {
		return Effect{}, false // not this record's renewal: the machine would drop it too
	}
	if msg.Fault != NoFault || !msg.Renewed {
		return Effect{}, true
	}
	v := Validity(msg.Sent, d.lease())
	if !v.After(d.deadlineAt(epoch)) {
		d.renewing = false
		return Effect{}, false
	}
	off, ok := offsetOf(v, epoch)
	if !ok {
		return Effect{}, true
	}
	d.renewing = false
	if d.watchdog {
		d.renewIn -= off - d.deadline // the next renewal stays where it was
	}
	d.deadline = off
	return Effect{Kind: EffDeadline, ID: id, At: v}, false
}

// Wake rebuilds the machine that slept into d, in the state it slept in
// (with the renewal Fire asked for still in flight, if it is) from epoch
// (the one Sleep was given), appending to
// buf the effects that set its timers again. id and field are the ones
// Sleep gave.
// The runtime then steps it with the input that woke it.
func Wake(name string, cfg Config, epoch time.Time, d *Dormant, id ReqID, field string, buf []Effect) (*Machine, []Effect) {
	m := New(name, cfg)
	m.kind = d.kindOf()
	m.nextID = d.gen + uint64(d.nextIDs)
	o := &owner{gen: d.gen, field: field, mode: d.mode, count: int64(d.count), token: d.token,
		lease: d.lease(), watchdog: d.watchdog, deadline: d.deadlineAt(epoch),
		renewInFlight: d.renewing, renewLease: d.lease(), current: true}
	if d.watchdog {
		o.renewNext = d.renewNext(epoch)
	}
	o.op.backoff = m.cfg.Backoff
	r := &request{Request: d.request(id, field), tryOnce: d.wait == 0, state: stateHeld, granted: true, owner: o}
	o.held, o.waiting = append(o.heldBuf[:0], r), o.waitBuf[:0]
	m.reqs = append(m.reqs, r)
	m.owners = append(m.owners, o)
	saved := m.out
	m.out = buf
	m.schedule(TimerDeadline, o.gen, o.deadline.Add(-m.cfg.Slack))
	if o.watchdog {
		m.schedule(TimerRenew, o.gen, o.renewNext)
	}
	buf, m.out = m.out, saved
	return m, buf
}

// kindOf is the kind of d's request.
func (d *Dormant) kindOf() *Kind {
	if d.kind == nil {
		return Reentrant
	}
	return d.kind
}

// renewalAfter moves a renewal time due at or before now along its grid of
// lease/3 steps to the first one after now: renewals keep absolute times
// (no drift from late firings), and a missed one is not made up twice.
func renewalAfter(next, now time.Time, lease time.Duration) time.Time {
	for !now.Before(next) {
		next = next.Add(lease / 3)
	}
	return next
}

// renewEffect is the watchdog renewal of owner generation gen's field,
// whose hold has the fencing token token (for the logs of a failure).
func renewEffect(k *Kind, gen uint64, name, field string, lease time.Duration, token uint64) Effect {
	key := scripts.LockKey(name)
	if k.RenewKey != nil {
		key = k.RenewKey(name)
	}
	return Effect{Kind: EffRenew, Op: gen, Script: k.Renew, Key: key, Field: field, Lease: lease, Token: token}
}
