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
// Every field of a sleeper, the entry it sleeps in and the buckets are
// guarded by System.mu: the buckets' firings, the renewals' replies and the
// wakers run on other goroutines.
type sleeper struct {
	e      *entry
	rec    lockactor.Dormant
	handle lockactor.Handle
	// nap is the tick whose bucket the record is due in (see napLocked);
	// entries for it in other buckets are stale.
	nap int64
}

// napLocked files sl in the bucket of the tick its record is due in (the
// sleeping records due in one wheel tick, fired by one wheel timer: a timer
// per record would cost each held lock a Timer and a closure), from which
// napFired fires it. A record moved to another tick leaves a stale entry
// behind, which its bucket skips. s.mu is held.
func (s *System) napLocked(sl *sleeper) {
	due := sl.rec.Due(s.cfg.Machine.Slack)
	// A bucket's records fire on the tick a wheel timer of their own
	// would: its timer is set for the due time of its first record.
	k := s.cfg.Wheel.TickOf(due)
	if sl.nap == k {
		return
	}
	sl.nap = k
	b, ok := s.naps[k]
	if !ok {
		s.cfg.Wheel.Schedule(due, func() { s.napFired(k) })
		if n := len(s.napFree); n > 0 {
			b, s.napFree = s.napFree[n-1], s.napFree[:n-1]
		}
	}
	s.naps[k] = append(b, sl)
}

// maxNapFree bounds the fired buckets kept for new ones (napFree): a
// watchdog's holds refile, a lease third later, into about as many
// buckets as they fired from.
const maxNapFree = 8

// wakeLocked returns the pid of e's actor, spawning the incarnation that
// will claim e's record if e sleeps. s.mu is held.
func (s *System) wakeLocked(e *entry) *protoactor.PID {
	if e.pid == nil {
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
// nothing is on its way to it and no timer of its (the linger timer
// included) is firing. It reports whether the actor stopped.
func (a *lockActor) trySleep(ctx protoactor.Context) bool {
	s := a.sys
	if a.e == nil || a.calls > 0 || a.renewals > 0 || a.firing > 0 || a.unsub != nil || a.done {
		return false
	}
	rec, ok := a.m.Sleep()
	if !ok {
		return false
	}
	h, _ := a.handles.get(rec.ID())
	sl := &sleeper{e: a.e, rec: rec, handle: h, nap: -1}
	s.mu.Lock()
	// Whatever keeps the actor awake here has a letter on its way to it
	// (a request, a timer's, Close's), whose turn tries again, or lingers
	// anew if the linger timer was stopped.
	if a.e.enqueues.Load() > 0 || s.closed || !a.stopIdle() || !a.disarmTimers() {
		s.mu.Unlock()
		return false
	}
	a.e.pid, a.e.sleep = nil, sl
	s.asleep++
	s.napLocked(sl)
	s.mu.Unlock()
	a.done = true
	ctx.Stop(a.self)
	return true
}

// wake rebuilds the machine from the record sl, in the incarnation that
// claimed it.
func (a *lockActor) wake(sl *sleeper) {
	buf := effectBufs.Get().(*[]lockactor.Effect)
	m, effs := lockactor.Wake(a.name, a.sys.cfg.Machine, &sl.rec, (*buf)[:0])
	a.m = m
	if sl.rec.Renewing() {
		a.renewals++ // the record's renewal answers here now
	}
	a.handles.set(sl.rec.ID(), sl.handle)
	a.fields.set(sl.rec.Field(), struct{}{})
	a.now = a.sys.cfg.Clock.Now() // dates the calls of the effects (callScript)
	for _, e := range effs {
		a.apply(e)
	}
	clear(effs)
	*buf = effs[:0]
	effectBufs.Put(buf)
}

// napFired fires the records of bucket k that are still due in it: each
// renews, or wakes its entry when its validity deadline is due.
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
	b := s.naps[k]
	delete(s.naps, k)
	now := s.cfg.Clock.Now()
	for _, sl := range b {
		e := sl.e
		if sl.nap != k || e.sleep != sl || e.pid != nil {
			continue // moved to another bucket, or woken
		}
		sl.nap = -1
		eff, msg := sl.rec.Fire(now, e.name, s.cfg.Machine.Slack)
		if msg.Kind != 0 {
			// Woken and counted now, under s.mu: a Close running once s.mu
			// is released must find the actor awake with this letter due.
			l := newLetter(tagMsg)
			l.msg = msg
			wakes = append(wakes, wake{s.readyLocked(e, l), l})
			continue
		}
		s.napLocked(sl)
		if eff.Kind == lockactor.EffRenew {
			*renews = append(*renews, renewal.Item{Script: eff.Script, Key: eff.Key, Field: eff.Field, Lease: eff.Lease, Token: eff.Token, Done: sl.renewDone})
		}
	}
	if len(s.napFree) < maxNapFree {
		clear(b)
		s.napFree = append(s.napFree, b[:0])
	}
	s.mu.Unlock()
	for _, w := range wakes {
		s.root.Send(w.pid, w.l)
	}
	s.cfg.Renewer.AddAll(*renews)
	clear(*renews)
	*renews = (*renews)[:0]
	renewBufs.Put(renews)
}

// renewBufs holds the slices napFired builds its renewals in.
var renewBufs = sync.Pool{New: func() any { return new([]renewal.Item) }}

// renewDone is the Done of a renewal the record sent (Fire); the record's
// generation is the renewal's Op.
func (sl *sleeper) renewDone(sent time.Time, renewed bool, err error) {
	s := sl.e.sys
	sl.renewed(lockactor.Msg{Kind: lockactor.MsgRenewReply, Op: sl.rec.Gen(), Sent: sent, Renewed: renewed, Err: err, Fault: s.renewFault(err)})
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
			s.napLocked(sl)
			s.mu.Unlock()
			return
		}
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
