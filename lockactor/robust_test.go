package lockactor

import (
	"errors"
	"testing"
	"time"

	"github.com/holdfast/holdfast/scripts"
)

// The wait budget ends a request at the budget even while its acquire is in
// flight (Redis unreachable: the call fails only at CallTimeout); the late
// reply is settled in the background, and a grant it made is undone.
func TestWaitBudgetEndsWhileAttemptInFlight(t *testing.T) {
	for _, reply := range []string{"granted", "ambiguous", "held"} {
		t.Run(reply, func(t *testing.T) {
			d := newDriver(t)
			acq := one(t, d.enqueue(1, "c:a", time.Second), EffAcquire)
			d.now = t0.Add(time.Second)
			effs := d.step(Msg{Kind: MsgTimer, Timer: TimerKey{TimerWait, 1}})
			if l := one(t, effs, EffLost); !errors.Is(l.Err, ErrWaitTimeout) {
				t.Fatalf("lost %v", l.Err)
			}
			if d.m.Idle() {
				t.Fatal("idle while the attempt is in flight")
			}
			d.now = t0.Add(5 * time.Second) // the call's timeout
			var msg Msg
			switch reply {
			case "granted":
				msg = granted(acq.Op, 1, 3)
			case "ambiguous":
				msg = Msg{Kind: MsgReply, Op: acq.Op, Fault: Ambiguous, Err: errors.New("timeout")}
			case "held":
				msg = held(acq.Op, time.Second)
			}
			effs = d.step(msg)
			none(t, effs, EffAcquired)
			none(t, effs, EffLost) // Lost closed once, at the budget
			if reply == "held" {
				if !d.m.Idle() {
					t.Fatal("not idle")
				}
				return
			}
			rel := one(t, effs, EffRelease)
			if rel.Field != "c:a" || rel.Expected != 1 {
				t.Fatalf("undo %+v", rel)
			}
			d.step(Msg{Kind: MsgReply, Op: rel.Op, Reply: []int64{0}})
			if !d.m.Idle() {
				t.Fatal("not idle after the undo")
			}
		})
	}
}

// READONLY on a renewal means a failover demoted the node: the hold ends at
// once, not at its deadline, with an error that says so.
func TestRenewalRefusedAsReplicaEndsHoldAtOnce(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:a", -1), EffAcquire)
	d.step(granted(acq.Op, 1, 1))
	var gen uint64
	for _, o := range d.m.owners {
		gen = o.gen
	}
	d.now = t0.Add(lease / 3)
	r := one(t, d.step(Msg{Kind: MsgTimer, Timer: TimerKey{TimerRenew, gen}}), EffRenew)
	effs := d.step(Msg{Kind: MsgRenewReply, Op: r.Op, Sent: d.now, Fault: Demoted,
		Err: errors.New("READONLY You can't write against a read only replica.")})
	if l := one(t, effs, EffLost); !errors.Is(l.Err, ErrFailover) {
		t.Fatalf("lost %v, want ErrFailover", l.Err)
	}
	if !d.m.Idle() {
		t.Fatal("not idle")
	}
}

// A read-write reentry answered with another token than its owner's met an
// older hold of the same field (a failover's roll-back brought it back): the
// owner's holds are Lost with ErrNotOwner, the hold the reentry joined is
// given back whole, and the reentry asks afresh once that is answered.
func TestRWReentryMeetingAnotherHoldLosesTheOwner(t *testing.T) {
	d := newDriver(t)
	enq := func(id ReqID) []Effect {
		return d.step(Msg{Kind: MsgEnqueue, Req: Request{ID: id, Field: "c:i:x:r", Lease: lease, Watchdog: true, Wait: -1, Kind: ReadWrite, Mode: ModeRead}})
	}
	call := func(effs []Effect) Effect {
		t.Helper()
		for _, e := range effs {
			if e.Kind == EffCall {
				return e
			}
		}
		t.Fatalf("no call in %v", kinds(effs))
		return Effect{}
	}
	acq := call(enq(1))
	one(t, d.step(granted(acq.Op, 1, 3)), EffAcquired)
	re := call(enq(2))
	if re.Call.Script != scripts.RWAcquireScript || re.Call.Args[2] != "1" {
		t.Fatalf("reentry call %s %v", re.Call.Script.Name, re.Call.Args)
	}
	effs := d.step(granted(re.Op, 2, 2)) // count as expected, but token 2, not 3
	none(t, effs, EffAcquired)
	if l := one(t, effs, EffLost); l.ID != 1 || !errors.Is(l.Err, ErrNotOwner) {
		t.Fatalf("lost %+v", l)
	}
	undo := call(effs)
	if undo.Call.Script != scripts.RWReleaseScript || undo.Call.Args[0] != "c:i:x:r" || undo.Call.Args[1] != "0" {
		t.Fatalf("undo call %s %v, want rw_release of the whole field", undo.Call.Script.Name, undo.Call.Args)
	}
	// The reentry, a fresh request now, waits for the undo's answer.
	effs = d.step(Msg{Kind: MsgReply, Op: undo.Op, Reply: []int64{0}})
	fresh := call(effs)
	if fresh.Call.Script != scripts.RWAcquireScript || fresh.Call.Args[2] != "0" {
		t.Fatalf("after the undo: %s %v, want a fresh rw_acquire", fresh.Call.Script.Name, fresh.Call.Args)
	}
	if a := one(t, d.step(granted(fresh.Op, 1, 4)), EffAcquired); a.ID != 2 || a.Token != 4 {
		t.Fatalf("acquired %+v", a)
	}
}

// A reentrant reentry is answered with the fence counter (fence_peek),
// never below a live hold's token. One below the owner's token means a
// roll-back lost the owner's grant and left an older hold of the same field
// (a named owner's earlier hold) in Redis: the owner is Lost with
// ErrNotOwner and that hold is given back whole, or the next fresh grant of
// the name would get this hold's token again (found by TestLockProperties,
// seed 5697703620948618727). A counter above the owner's token is a later
// grant of another name of the slot and changes nothing.
func TestReentryBelowTheOwnersTokenLosesTheOwner(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:a", -1), EffAcquire)
	one(t, d.step(granted(acq.Op, 1, 3)), EffAcquired)
	re := one(t, d.enqueue(2, "c:a", -1), EffAcquire)
	effs := d.step(granted(re.Op, 2, 5)) // the counter moved on: fine
	if a := one(t, effs, EffAcquired); a.ID != 2 || a.Token != 3 {
		t.Fatalf("reentry acquired %+v, want request 2 with the owner's token 3", a)
	}
	re = one(t, d.enqueue(3, "c:a", -1), EffAcquire)
	effs = d.step(granted(re.Op, 3, 2)) // the counter below the hold's token
	none(t, effs, EffAcquired)
	lost := map[ReqID]bool{}
	for _, e := range effs {
		if e.Kind == EffLost {
			if !errors.Is(e.Err, ErrNotOwner) {
				t.Fatalf("lost with %v", e.Err)
			}
			lost[e.ID] = true
		}
	}
	if !lost[1] || !lost[2] {
		t.Fatalf("lost %v, want both holds of the owner", lost)
	}
	if undo := one(t, effs, EffRelease); undo.Call.Args[0] != "c:a" {
		t.Fatalf("undo %v, want a release of the field", undo.Call.Args)
	}
}
