package actor

import (
	"context"
	"strings"
	"sync"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"

	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/pubsub"
	"github.com/holdfast/holdfast/renewal"
	"github.com/holdfast/holdfast/timerwheel"
)

// lockActor runs the machine of one lock name.
type lockActor struct {
	sys  *System
	name string
	self *protoactor.PID
	e    *entry // the registry's entry of this incarnation (claim)

	m       *lockactor.Machine
	handles smallMap[lockactor.ReqID, lockactor.Handle]
	timers  smallMap[lockactor.TimerKey, *machineTimer] // pending ones
	// spareTimers are machine timer records free for reuse (timers.go).
	spareTimers []*machineTimer
	seq         uint64
	unsub       func()
	// fields are the owner fields this actor may have written to Redis
	// since it was last idle: on a crash, each is released (abandoned).
	// An actor that is never idle (a hot lock: a new field per Lock) would
	// gather fields without end, so once there are pruneFields of them the
	// set keeps only those its machine still uses (prune).
	fields      smallMap[string, struct{}]
	pruneFields int
	// firing counts the machine timers cancelled while they fired, whose
	// letters are still on their way: the actor stops only at zero.
	firing int
	done   bool // passivated or stopped: ignore everything
	// idle is the linger timer of an idle actor (left running when the
	// actor gets busy again); idleSeq tells its firing from that of an
	// earlier one.
	idle    *timerwheel.Timer
	idleSeq uint64
	idleAt  time.Time // when the actor last became quiet
	// quiet: the machine is idle, or holds quietly (Machine.Quiet) and may
	// sleep once it has been so for IdleTimeout (see sleep.go).
	quiet bool
	// calls and renewals count the script calls and renewals in flight,
	// whose replies come here: the actor stops only when both are zero.
	calls, renewals int
	// now is the time of the turn under way (step), which dates the
	// timeouts of the calls it makes (callScript).
	now time.Time
}

// effectBufs holds the buffers the machines' effects are collected in,
// shared by all actors rather than one kept per lock.
var effectBufs = sync.Pool{New: func() any { return new([]lockactor.Effect) }}

// lockActorName reads the lock name from the protoactor id of its actor:
// the name, then '$' and a number unique in the process
// (RootContext.SpawnPrefix), so every incarnation starts blank and learns
// its name at Started. One Props then serves every actor of a System: one
// of its own per actor cost each held lock about 250 bytes.
func lockActorName(id string) string { return id[:strings.LastIndexByte(id, '$')] }

// Receive implements protoactor.Actor.
func (a *lockActor) Receive(ctx protoactor.Context) {
	switch msg := ctx.Message().(type) {
	case *protoactor.Started:
		a.self = ctx.Self()
		a.name = lockActorName(a.self.Id)
		e, rec, h, woke := a.sys.claim(a.name, a.self)
		a.e = e
		if woke {
			a.wake(&rec, h)
			return
		}
		a.m = lockactor.New(a.name, a.sys.cfg.Machine)
		if a.m.Idle() && a.sys.passivate(a.name) {
			// A restarted incarnation with nothing on its way: stop.
			a.done = true
			ctx.Stop(a.self)
		}
	case *letter:
		if msg.counted && a.e != nil {
			a.sys.received(a.e)
		}
		a.receive(ctx, msg)
		msg.free()
	case *protoactor.Restarting:
		a.abandon(panicError("restarted after a panic"))
	case *protoactor.Stopped:
		if !a.done {
			// Stopped by the supervisor (too many restarts) or the system.
			a.abandon(panicError("stopped"))
			a.sys.forget(a.name)
		}
	}
}

// receive handles a letter from the runtime.
func (a *lockActor) receive(ctx protoactor.Context, l *letter) {
	switch l.tag {
	case tagEnqueue:
		a.handles.set(l.msg.Req.ID, l.handle)
		a.step(ctx, lockactor.Msg{Kind: lockactor.MsgEnqueue, Req: l.msg.Req})
	case tagMsg:
		switch {
		case l.msg.Kind == lockactor.MsgReply && a.calls > 0:
			a.calls--
		case l.msg.Kind == lockactor.MsgRenewReply && a.renewals > 0:
			a.renewals--
		}
		if l.msg.Kind == lockactor.MsgShutdown && a.m.Idle() {
			a.passivate(ctx)
			return
		}
		a.step(ctx, l.msg)
	case tagTimer:
		if key, ok := a.timerFired(l.timer, l.seq); ok {
			a.step(ctx, lockactor.Msg{Kind: lockactor.MsgTimer, Timer: key})
		} else if !a.done && a.firing == 0 {
			// The last cancelled timer's letter: a passivation or sleep
			// that waited for it may go ahead.
			a.settle(ctx, a.sys.cfg.Clock.Now())
		}
	case tagIdle:
		if a.idle != nil && l.seq == a.idleSeq {
			a.idle = nil
			if a.done {
				return
			}
			if a.m.Idle() && a.sys.closing() {
				// A passivation at Close that waited for this letter. It
				// comes before the test of quiet: the turn that left the
				// machine idle at Close (settle) tried to passivate before
				// marking it quiet, so an actor busy until then is idle
				// but not quiet, and nothing else would stop it.
				a.passivate(ctx)
				return
			}
			if !a.quiet {
				return
			}
			// The timer is left running while the actor is busy (see step):
			// the linger counts from the moment it last became quiet.
			if due := a.idleAt.Add(a.sys.cfg.IdleTimeout); a.sys.cfg.Clock.Now().Before(due) {
				a.lingerUntil(due)
				return
			}
			if a.m.Idle() {
				a.passivate(ctx)
				return
			}
			// Held quietly: sleep, unless a renewal is in flight (its
			// reply's turn tries again, see step).
			a.trySleep(ctx)
		}
	case tagCrash:
		panic("holdfast: injected crash")
	}
}

func (a *lockActor) step(ctx protoactor.Context, msg lockactor.Msg) {
	if a.done {
		return
	}
	now := a.sys.cfg.Clock.Now()
	a.now = now
	buf := effectBufs.Get().(*[]lockactor.Effect)
	effs := a.m.StepInto((*buf)[:0], now, msg)
	for i := range effs {
		a.apply(&effs[i])
	}
	clear(effs) // let go of what the effects refer to
	*buf = effs[:0]
	effectBufs.Put(buf)
	a.settle(ctx, now)
}

// settle ends a turn, at now, that may have left the machine idle or
// quiet: it passivates an idle actor at Close, and otherwise lingers,
// sleeps or passivates once the linger is over.
func (a *lockActor) settle(ctx protoactor.Context, now time.Time) {
	idle := a.m.Idle()
	if !idle && !a.m.Quiet() {
		// A pending linger timer keeps running: when it fires, it sees
		// the actor busy, or quiet since a later moment and lingers on.
		// Stopping and scheduling it again on every cycle cost two
		// allocations per cycle.
		a.quiet = false
		return
	}
	if idle {
		a.fields.empty()
		if a.sys.closing() {
			a.passivate(ctx)
			return
		}
	}
	// Linger a while: a lock taken again soon keeps its actor, and a
	// hold sleeps only once it has been quiet for the linger. A renewal
	// keeps a hold quiet, so that a lock renewed more often than the
	// linger sleeps all the same: the turn of the renewal's reply that
	// finds the linger over tries at once.
	if !a.quiet {
		a.quiet, a.idleAt = true, now
	}
	due := a.idleAt.Add(a.sys.cfg.IdleTimeout)
	if !idle && !now.Before(due) && a.trySleep(ctx) {
		return
	}
	if a.idle == nil {
		if due.Before(now) {
			due = now
		}
		a.lingerUntil(due)
	}
}

// lingerUntil schedules the idle actor's linger timer.
func (a *lockActor) lingerUntil(t time.Time) {
	a.idleSeq++
	seq := a.idleSeq
	a.idle = a.sys.cfg.Wheel.Schedule(t, func() {
		l := newLetter(tagIdle)
		l.seq = seq
		a.post(l)
	})
}

// passivate stops the actor if no request is on its way to it, no call or
// renewal of its is in flight (the turn of its reply passivates it then) and
// none of its timers, cancelled or not, is firing (the turn of the letter
// does then): no letter is ever sent to an actor that has stopped.
func (a *lockActor) passivate(ctx protoactor.Context) {
	if a.calls > 0 || a.renewals > 0 || a.firing > 0 || !a.stopIdle() {
		return
	}
	if a.sys.passivate(a.name) {
		a.done = true
		ctx.Stop(a.self)
	}
}

// stopIdle stops the linger timer, if any. It reports false when the timer
// has fired and its letter is on its way: the actor must not stop before
// that letter arrives (it would be a dead letter), and the letter's turn
// tries again.
func (a *lockActor) stopIdle() bool {
	if a.idle == nil {
		return true
	}
	if !a.idle.Stop() {
		return false
	}
	a.idle = nil
	return true
}

// post sends l to the actor.
func (a *lockActor) post(l *letter) {
	a.sys.root.Send(a.self, l)
}

// send sends the machine message msg to the actor.
func (a *lockActor) send(msg lockactor.Msg) {
	a.post(msgLetter(msg))
}

// msgLetter puts the machine message msg in a letter.
func msgLetter(msg lockactor.Msg) *letter {
	l := newLetter(tagMsg)
	l.msg = msg
	if len(msg.Reply) <= len(l.vals) {
		// The reply may live in a buffer its sender reuses (CallResult).
		l.msg.Reply = l.vals[:copy(l.vals[:], msg.Reply)]
	}
	return l
}

// reply delivers a script call's reply from the goroutine that made the
// call: the actor's turn runs on it if the actor is idle (a letter marked
// now, see mailbox.PostUserMessage), with no hop to a runner. It used to
// go through the pool's tail queue to the same end, at three more takes of
// the pool's lock per call, which every sender and runner shares.
func (a *lockActor) reply(msg lockactor.Msg) {
	l := msgLetter(msg)
	l.now = true
	a.post(l)
}

// minPruneFields is the size of an actor's field set below which it is not
// pruned: the set is emptied whenever the actor is idle, which most actors
// are between their few Locks.
const minPruneFields = 32

// prune drops from the field set the fields the machine no longer uses
// (Machine.UsesField), keeping cur, the field of the call being sent. It
// runs between turns of the machine, never on one that failed. The next
// prune waits until the set has doubled, so a set kept by a busy actor
// costs each call a constant share of the scans.
func (a *lockActor) prune(cur string) {
	keep := a.fields.entries[:0]
	for _, f := range a.fields.entries {
		if f.key == cur || a.m.UsesField(f.key) {
			keep = append(keep, f)
		}
	}
	clear(a.fields.entries[len(keep):])
	a.fields.entries = keep
	a.pruneFields = 2 * len(keep)
}

// The closures below capture copies of e's fields, never e itself: it
// points into the turn's effect buffer, which the next turn reuses. An
// Effect is some 200 bytes, so it is not copied to be applied.
func (a *lockActor) apply(e *lockactor.Effect) {
	s := a.sys
	switch e.Kind {
	case lockactor.EffCall:
		if e.Field != "" {
			a.fields.set(e.Field, struct{}{})
			if a.fields.len() >= max(a.pruneFields, minPruneFields) {
				a.prune(e.Field)
			}
		}
		a.calls++
		s.callScript(a, e.Op, e.Call)
	case lockactor.EffRenew:
		a.renewals++
		op := e.Op
		s.cfg.Renewer.Add(renewal.Item{Script: e.Script, Key: e.Key, Field: e.Field, Lease: e.Lease, Token: e.Token,
			Done: func(sent time.Time, renewed bool, err error) {
				a.send(lockactor.Msg{Kind: lockactor.MsgRenewReply, Op: op, Sent: sent, Renewed: renewed, Err: err, Fault: s.renewFault(err)})
			}})
	case lockactor.EffSchedule:
		a.schedule(e.Timer, e.At)
	case lockactor.EffCancelTimer:
		a.cancelTimer(e.Timer)
	case lockactor.EffSubscribe:
		if a.unsub == nil {
			a.unsub = s.cfg.Subscriber.Subscribe(e.Channel, a.onEvent)
		}
	case lockactor.EffUnsubscribe:
		if a.unsub != nil {
			a.unsub()
			a.unsub = nil
		}
	case lockactor.EffAcquired:
		if h, _ := a.handles.get(e.ID); h != nil {
			h.Acquired(e.Token, e.At)
		}
	case lockactor.EffDeadline:
		if h, _ := a.handles.get(e.ID); h != nil {
			h.SetDeadline(e.At)
		}
	case lockactor.EffReleaseDone:
		if h, _ := a.handles.get(e.ID); h != nil {
			h.ReleaseDone(e.Err)
		}
	case lockactor.EffLost:
		if h, _ := a.handles.get(e.ID); h != nil {
			a.handles.del(e.ID)
			h.Lost(e.Err)
		}
	}
}

// renewFault classifies a renewal's error; a batcher that closed refused
// the renewal before sending it.
func (s *System) renewFault(err error) lockactor.Fault {
	if err == renewal.ErrClosed {
		return lockactor.Transient
	}
	return s.cfg.Redis.Classify(err)
}

func (a *lockActor) onEvent(ev pubsub.Event) {
	switch ev {
	case pubsub.Subscribed:
		a.send(lockactor.Msg{Kind: lockactor.MsgSubscribed})
	case pubsub.Message:
		a.send(lockactor.Msg{Kind: lockactor.MsgWake})
	case pubsub.Resync:
		a.send(lockactor.Msg{Kind: lockactor.MsgResync})
	}
}

// abandon is the crash path: the machine's state cannot be trusted after a
// panic, so every request of this actor ends with err — no hold is dropped
// silently — and every owner field it may have written is released in Redis
// whatever its count. The next incarnation starts empty.
func (a *lockActor) abandon(err error) {
	a.stopTimers()
	if a.unsub != nil {
		a.unsub()
		a.unsub = nil
	}
	handles := a.handles.entries
	a.handles.reset()
	for _, h := range handles {
		h.val.Lost(err)
	}
	s := a.sys
	kind, env := a.m.Kind(), a.m.Env()
	for _, f := range a.fields.entries {
		c := kind.Release(env, f.key, 0)
		s.call(func(ctx context.Context) {
			s.cfg.Redis.Call(ctx, c)
		})
	}
	a.fields.reset()
}
