package lockactor

import (
	"errors"
	"testing"
	"time"
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
