package actor

import (
	"sync"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"

	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/renewal"
)

// Sleeping locks. An actor whose machine has been quiet — one Lock holding
// it, nothing waiting or in flight — for IdleTimeout folds the machine into
// a lockactor.Dormant and stops: its entry keeps the record and the Lock's
// handle, filed in the bucket of the wheel tick it is due in (napLocked),
// under two hundred bytes instead of the few kilobytes of a machine and a
// protoactor process. The record renews the
// lease itself while the renewals succeed (Dormant.Fire, RenewReply). Any
// other event — a Release or cancellation through the Lock's Ref, a new
// Lock on the name, a renewal that failed, the validity deadline, Close —
// wakes the entry: a new incarnation claims the record, rebuilds the
// machine with lockactor.Wake and receives the event as a letter, as the
// machine that slept would have.
//
// A sleeping entry's fields, the entry itself and the buckets are guarded
// by System.mu: the buckets' firings, the renewals' replies and the wakers
// run on other goroutines.

// napLocked files the sleeping entry e in the bucket of the wheel tick its
// record is due in (the records due in one wheel tick, fired by one wheel
// timer: a timer per record would cost each held lock a Timer and a
// closure), from which napFired fires it. Buckets are lists through the
// entries (prev, next): filing costs a hold no memory of its own. e is not
// filed (unnapLocked). s.mu is held.
func (s *System) napLocked(e *entry) {
	due := e.rec.Due(s.epoch, s.cfg.Machine.Slack)
	// A bucket's records fire on the tick a wheel timer of their own
	// would: its timer is set for the due time of its first record.
	k := s.cfg.Wheel.TickOf(due)
	head, ok := s.naps[k]
	if !ok {
		s.cfg.Wheel.Schedule(due, func() { s.napFired(k) })
	}
	e.prev, e.next, e.filed = nil, head, true
	if head != nil {
		head.prev = e
	}
	s.naps[k] = e
}

// unnapLocked takes e out of its bucket, if it is filed. Its record must
// be as it was when filed: the bucket is found by the tick the record is
// due in, so a record changes only unfiled. s.mu is held.
func (s *System) unnapLocked(e *entry) {
	if !e.filed {
		return
	}
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		k := s.cfg.Wheel.TickOf(e.rec.Due(s.epoch, s.cfg.Machine.Slack))
		if s.naps[k] != e {
			panic("actor: a sleeping record changed while filed")
		}
		s.naps[k] = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	}
	e.prev, e.next, e.filed = nil, nil, false
}

// wakeLocked returns the pid of e's actor, spawning the incarnation that
// will claim e's record if e sleeps. s.mu is held.
func (s *System) wakeLocked(e *entry) *protoactor.PID {
	if e.pid == nil {
		s.unnapLocked(e)
		e.pid = s.root.SpawnPrefix(s.props, e.name)
		s.asleep--
	}
	return e.pid
}

// claim is a new incarnation's first act: it returns the entry of name,
// if its pid is self, and whether the incarnation wakes from the entry's
// record, which it then reads (rec, handle) and clears.
func (s *System) claim(name string, self *protoactor.PID) (e *entry, rec lockactor.Dormant, h lockactor.Handle, woke bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e = s.actors.get(name)
	if e == nil || e.pid == nil || !e.pid.Equal(self) {
		return nil, rec, nil, false
	}
	if !e.asleep {
		return e, rec, nil, false
	}
	rec, h = e.rec, e.handle
	e.asleep, e.rec, e.handle = false, lockactor.Dormant{}, nil
	return e, rec, h, true
}

// trySleep puts the actor to sleep if its machine can (Machine.Sleep),
// nothing is on its way to it and no timer of its (the linger timer
// included) is firing. It reports whether the actor stopped.
func (a *lockActor) trySleep(ctx protoactor.Context) bool {
	s := a.sys
	if a.e == nil || a.calls > 0 || a.renewals > 0 || a.firing > 0 || a.unsub != nil || a.done {
		return false
	}
	rec, id, field, ok := a.m.Sleep(s.epoch)
	if !ok {
		return false
	}
	h, _ := a.handles.get(id)
	if g, ok := h.(lockactor.Giver); !ok || g.RequestID() != id || g.OwnerField() != field {
		// The record keeps neither the request's ID nor its owner field:
		// the Lock gives them again when the record needs them (entry.id,
		// entry.field), so a quiet hold keeps no string of its own. A
		// handle that cannot stays awake.
		return false
	}
	s.mu.Lock()
	// Whatever keeps the actor awake here has a letter on its way to it
	// (a request, a timer's, Close's), whose turn tries again, or lingers
	// anew if the linger timer was stopped.
	if a.e.enqueues.Load() > 0 || s.closed || !a.stopIdle() || !a.disarmTimers() {
		s.mu.Unlock()
		return false
	}
	e := a.e
	e.pid, e.asleep, e.rec, e.handle = nil, true, rec, h
	s.asleep++
	s.napLocked(e)
	s.mu.Unlock()
	a.done = true
	ctx.Stop(a.self)
	return true
}

// wake rebuilds the machine from the record rec and its Lock's handle h,
// in the incarnation that claimed them.
func (a *lockActor) wake(rec *lockactor.Dormant, h lockactor.Handle) {
	buf := effectBufs.Get().(*[]lockactor.Effect)
	g := h.(lockactor.Giver) // trySleep checked it gives them
	id, field := g.RequestID(), g.OwnerField()
	m, effs := lockactor.Wake(a.name, a.sys.cfg.Machine, a.sys.epoch, rec, id, field, (*buf)[:0])
	a.m = m
	if rec.Renewing() {
		a.renewals++ // the record's renewal answers here now
	}
	a.handles.set(id, h)
	a.fields.set(field, struct{}{})
	a.now = a.sys.cfg.Clock.Now() // dates the calls of the effects (callScript)
	for i := range effs {
		a.apply(&effs[i])
	}
	clear(effs)
	*buf = effs[:0]
	effectBufs.Put(buf)
}

// napFired fires the records of bucket k: each renews, or wakes its entry
// when its validity deadline is due.
func (s *System) napFired(k int64) {
	type wake struct {
		pid *protoactor.PID
		l   *letter
	}
	var (
		// renews are built here, under s.mu, as the Items the Renewer
		// takes (about a quarter of an Effect's size): a bucket may hold
		// thousands of records. The slice is reused from one firing to
		// the next (AddAll keeps no item).
		renews = renewBufs.Get().(*[]renewal.Item)
		wakes  []wake
	)
	s.mu.Lock()
	e := s.naps[k]
	delete(s.naps, k)
	now := s.cfg.Clock.Now()
	for e != nil {
		next := e.next
		// Every entry in the list sleeps (wakeLocked takes an entry out
		// of its bucket), and is unfiled now, its record free to change.
		e.prev, e.next, e.filed = nil, nil, false
		eff, msg := e.rec.Fire(s.epoch, now, e.name, e.field(), s.cfg.Machine.Slack)
		if msg.Kind != 0 {
			// Woken and counted now, under s.mu: a Close running once s.mu
			// is released must find the actor awake with this letter due.
			l := newLetter(tagMsg)
			l.msg = msg
			wakes = append(wakes, wake{s.readyLocked(e, l), l})
		} else {
			s.napLocked(e)
			if eff.Kind == lockactor.EffRenew {
				*renews = append(*renews, renewal.Item{Script: eff.Script, Key: eff.Key, Field: eff.Field, Lease: eff.Lease, Token: eff.Token, Done: e.renewDone(eff.Op)})
			}
		}
		e = next
	}
	s.mu.Unlock()
	for _, w := range wakes {
		s.root.Send(w.pid, w.l)
	}
	s.cfg.Renewer.AddAll(*renews)
	if cap(*renews) > renewal.MaxSpare {
		return // a burst's: the pool keeps no more than a round's spare
	}
	clear(*renews)
	*renews = (*renews)[:0]
	renewBufs.Put(renews)
}

// renewBufs holds the slices napFired builds its renewals in.
var renewBufs = sync.Pool{New: func() any { return new([]renewal.Item) }}

// renewDone is the Done of a renewal the record of e sent (Fire), whose
// Op is the record's generation.
func (e *entry) renewDone(op uint64) func(time.Time, bool, error) {
	return func(sent time.Time, renewed bool, err error) {
		s := e.sys
		e.renewed(lockactor.Msg{Kind: lockactor.MsgRenewReply, Op: op, Sent: sent, Renewed: renewed, Err: err, Fault: s.renewFault(err)})
	}
}

// renewed takes the reply to a renewal the record of e sent: the record
// keeps a success while it sleeps; anything else, or any reply once the
// entry woke, goes to the actor. A reply reaches the record it was sent by:
// a record whose renewal is in flight is claimed by its next incarnation
// with it (Renewing), and that incarnation does not sleep again until the
// reply has reached it.
func (e *entry) renewed(msg lockactor.Msg) {
	s := e.sys
	s.mu.Lock()
	if e.asleep && e.pid == nil {
		s.unnapLocked(e)
		dl, wake := e.rec.RenewReply(s.epoch, e.id(), msg)
		if !wake {
			if dl.Kind == lockactor.EffDeadline {
				e.handle.SetDeadline(dl.At)
			}
			s.napLocked(e)
			s.mu.Unlock()
			return
		}
		// The woken machine is filed nowhere: wakeLocked below finds
		// the entry unfiled.
	}
	l := newLetter(tagMsg)
	l.msg = msg
	pid := s.readyLocked(e, l)
	s.mu.Unlock()
	s.root.Send(pid, l)
}

// disarmTimers stops every machine timer of the actor for a sleep, and
// reports whether all stopped; if one is firing (its letter is on its way),
// the others are armed again and the actor stays awake.
func (a *lockActor) disarmTimers() bool {
	for i, te := range a.timers.entries {
		if !te.val.t.Stop() {
			for _, p := range a.timers.entries[:i] {
				a.sys.cfg.Wheel.Arm(&p.val.t, p.val.at, p.val.fire)
			}
			return false
		}
	}
	a.timers.reset()
	return true
}

// id and field are the request and owner field of the sleeping record of
// e, given again by its Lock (trySleep put it to sleep only so). s.mu is
// held.
func (e *entry) id() lockactor.ReqID { return e.handle.(lockactor.Giver).RequestID() }

func (e *entry) field() string { return e.handle.(lockactor.Giver).OwnerField() }
