package actor

import (
	"time"

	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/timerwheel"
)

// machineTimer is one of a lock actor's machine timers (renewal, validity
// deadline, ...), kept for reuse: a held lock sets two and its release
// cancels them, and a fresh timer and closure for each was four allocations
// per cycle.
//
// Ownership: the actor's goroutine owns a record while it is not armed.
// Armed, the wheel owns it until Stop succeeds; once it fires, it is owned
// by its letter until the actor receives that letter, whatever the letter
// says. So fire may read seq, and the actor never arms a record whose
// previous firing could still be under way (timerwheel.Arm's rule).
type machineTimer struct {
	t    timerwheel.Timer
	a    *lockActor
	key  lockactor.TimerKey
	at   time.Time // when it is due (a sleep that fails arms it again)
	seq  uint64    // tells this arming's firing from an earlier one
	fire func()    // t's function: posts the firing to the actor; bound once
}

// maxSpareTimers bounds the records an actor keeps for reuse.
const maxSpareTimers = 4

func (mt *machineTimer) post() {
	l := newLetter(tagTimer)
	l.timer, l.seq = mt, mt.seq
	mt.a.post(l)
}

// schedule arms the machine timer key for at, replacing a pending one.
func (a *lockActor) schedule(key lockactor.TimerKey, at time.Time) {
	a.cancelTimer(key)
	var mt *machineTimer
	if n := len(a.spareTimers); n > 0 {
		mt = a.spareTimers[n-1]
		a.spareTimers[n-1] = nil
		a.spareTimers = a.spareTimers[:n-1]
	} else {
		mt = &machineTimer{a: a}
		mt.fire = mt.post
	}
	a.seq++
	mt.key, mt.at, mt.seq = key, at, a.seq
	a.timers.set(key, mt)
	a.sys.cfg.Wheel.Arm(&mt.t, at, mt.fire)
}

// cancelTimer drops the machine timer key, if pending. A record whose Stop
// fails is firing: its letter, when it comes, hands it back (timerFired),
// and until then the actor counts it (firing) and does not stop.
func (a *lockActor) cancelTimer(key lockactor.TimerKey) {
	mt, ok := a.timers.get(key)
	if !ok {
		return
	}
	a.timers.del(key)
	if mt.t.Stop() {
		a.spare(mt)
	} else {
		a.firing++
	}
}

// timerFired handles the letter of a firing of mt: it is the machine's
// timer if mt is still the current record of its key (a cancelled or
// replaced one is not), and either way mt is free again.
func (a *lockActor) timerFired(mt *machineTimer, seq uint64) (lockactor.TimerKey, bool) {
	if mt.a != a {
		return lockactor.TimerKey{}, false // an earlier incarnation's (see abandon)
	}
	if cur, ok := a.timers.get(mt.key); ok && cur == mt {
		if mt.seq != seq {
			// Cannot happen: a record is not armed again while its
			// letter is on its way. Leave it alone rather than reuse an
			// armed record.
			return lockactor.TimerKey{}, false
		}
		a.timers.del(mt.key)
		a.spare(mt)
		return mt.key, true
	}
	a.spare(mt) // cancelled or replaced while it fired
	if a.firing > 0 {
		a.firing--
	}
	return lockactor.TimerKey{}, false
}

func (a *lockActor) spare(mt *machineTimer) {
	if len(a.spareTimers) < maxSpareTimers {
		a.spareTimers = append(a.spareTimers, mt)
	}
}

// stopTimers stops every machine timer (the crash path).
func (a *lockActor) stopTimers() {
	for _, e := range a.timers.entries {
		e.val.t.Stop()
	}
	a.timers.reset()
	a.spareTimers = nil
}
