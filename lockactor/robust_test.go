package lockactor

import (
	"errors"
	"testing"
)

// READONLY on a renewal means a failover demoted the node: the hold ends at
// once, not at its deadline, with an error that says so.
func TestRenewalRefusedAsReplicaEndsHoldAtOnce(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:a", -1), EffAcquire)
	d.step(granted(acq.Op, 1, 1))
	gen := d.m.owners[0].gen
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
