package actor

import (
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"

	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/renewal"
	"github.com/holdfast/holdfast/timerwheel"
)

// Sleeping locks. An actor whose machine has been quiet — one Lock holding
// it, nothing waiting or in flight — for IdleTimeout folds the machine into
// a lockactor.Dormant and stops: its entry keeps the record, the Lock's
// handle and one wheel timer, a few hundred bytes instead of the few
// kilobytes of a machine and a protoactor process. The record renews the
// lease itself while the renewals succeed (Dormant.Fire, RenewReply). Any
// other event — a Release or cancellation through the Lock's Ref, a new
// Lock on the name, a renewal that failed, the validity deadline, Close —
// wakes the entry: a new incarnation claims the record, rebuilds the
// machine with lockactor.Wake and receives the event as a letter, as the
// machine that slept would have.
//
// Every field of a sleeper, and the entry it sleeps in, is guarded by
// System.mu: the timer's firings, the renewals' replies and the wakers run
// on other goroutines.
type sleeper struct {
	e      *entry
	rec    lockactor.Dormant
	handle lockactor.Handle
	t      timerwheel.Timer
	fire   func() // s.fired, bound once
}

// wakeLocked returns the pid of e's actor, spawning the incarnation that
// will claim e's record if e sleeps. s.mu is held.
func (s *System) wakeLocked(e *entry) *protoactor.PID {
	if e.pid == nil {
		// If the timer is firing, fired finds the entry awake and stops.
		e.sleep.t.Stop()
		e.pid = s.root.SpawnPrefix(s.props, e.name)
		s.asleep--
	}
	return e.pid
}

// claim is a new incarnation's first act: it returns the entry of name,
// if its pid is self, and the record the incarnation wakes from, if any.
func (s *System) claim(name string, self *protoactor.PID) (*entry, *sleeper) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.actors[name]
	if e == nil || e.pid == nil || !e.pid.Equal(self) {
		return nil, nil
	}
	sl := e.sleep
	e.sleep = nil
	return e, sl
}

// trySleep puts the actor to sleep if its machine can (Machine.Sleep),
// nothing is on its way to it and no timer of its is firing. It reports
// whether the actor stopped.
func (a *lockActor) trySleep(ctx protoactor.Context) bool {
	s := a.sys
	if a.e == nil || a.calls > 0 || a.unsub != nil || a.done {
		return false
	}
	rec, ok := a.m.Sleep()
	if !ok {
		return false
	}
	h, _ := a.handles.get(rec.ID())
	sl := &sleeper{e: a.e, rec: rec, handle: h}
	sl.fire = sl.fired
	s.mu.Lock()
	if a.e.enqueues > 0 || s.closed || !a.disarmTimers() {
		s.mu.Unlock()
		return false
	}
	a.e.pid, a.e.sleep = nil, sl
	s.asleep++
	s.cfg.Wheel.Arm(&sl.t, sl.rec.Due(), sl.fire)
	s.mu.Unlock()
	a.done = true
	if a.idle != nil {
		a.idle.Stop()
		a.idle = nil
	}
	ctx.Stop(a.self)
	return true
}

// wake rebuilds the machine from the record sl, in the incarnation that
// claimed it.
func (a *lockActor) wake(sl *sleeper) {
	buf := effectBufs.Get().(*[]lockactor.Effect)
	m, effs := lockactor.Wake(a.name, a.sys.cfg.Machine, &sl.rec, (*buf)[:0])
	a.m = m
	a.handles.set(sl.rec.ID(), sl.handle)
	a.fields.set(sl.rec.Field(), struct{}{})
	for _, e := range effs {
		a.apply(e)
	}
	clear(effs)
	*buf = effs[:0]
	effectBufs.Put(buf)
}

// fired is the record's timer: it renews, or wakes the entry when the
// validity deadline is due.
func (sl *sleeper) fired() {
	e := sl.e
	s := e.sys
	s.mu.Lock()
	if e.sleep != sl || e.pid != nil {
		s.mu.Unlock()
		return // woken meanwhile
	}
	renew, wake := sl.rec.Fire(s.cfg.Clock.Now(), e.name)
	if wake.Kind != 0 {
		s.mu.Unlock()
		l := newLetter(tagMsg)
		l.msg = wake
		s.deliver(e, l)
		return
	}
	s.cfg.Wheel.Arm(&sl.t, sl.rec.Due(), sl.fire)
	s.mu.Unlock()
	if renew.Kind == lockactor.EffRenew {
		op := renew.Op
		s.cfg.Renewer.Add(renewal.Item{Script: renew.Script, Key: renew.Key, Field: renew.Field, Lease: renew.Lease,
			Done: func(sent time.Time, renewed bool, err error) {
				sl.renewed(lockactor.Msg{Kind: lockactor.MsgRenewReply, Op: op, Sent: sent, Renewed: renewed, Err: err, Fault: s.renewFault(err)})
			}})
	}
}

// renewed takes the reply to a renewal the record sent: the record keeps a
// success while it sleeps; anything else, or any reply once the entry woke,
// goes to the actor.
func (sl *sleeper) renewed(msg lockactor.Msg) {
	e := sl.e
	s := e.sys
	s.mu.Lock()
	if e.sleep == sl && e.pid == nil {
		dl, wake := sl.rec.RenewReply(msg)
		if !wake {
			if dl.Kind == lockactor.EffDeadline {
				sl.handle.SetDeadline(dl.At)
			}
			// A timer that fails to stop is firing: fired re-arms it.
			if sl.t.Stop() {
				s.cfg.Wheel.Arm(&sl.t, sl.rec.Due(), sl.fire)
			}
			s.mu.Unlock()
			return
		}
	}
	s.mu.Unlock()
	l := newLetter(tagMsg)
	l.msg = msg
	s.deliver(e, l)
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
