package lockactor

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestUnsyncedGrantIsUndone: a fresh grant too few replicas acknowledged
// (Fault Unsynced) never reports Acquired: the request ends with the reply's
// ErrReplicaSync and the grant is released, owner-checked.
func TestUnsyncedGrantIsUndone(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:a", -1), EffAcquire)
	msg := granted(acq.Op, 1, 7)
	msg.Fault, msg.Err = Unsynced, fmt.Errorf("%w: 0 of 1", ErrReplicaSync)
	effs := d.step(msg)
	none(t, effs, EffAcquired)
	rel := one(t, effs, EffRelease)
	if rel.Expected != 1 || rel.Field != "c:a" {
		t.Fatalf("undo release %+v", rel)
	}
	if l := one(t, effs, EffLost); !errors.Is(l.Err, ErrReplicaSync) {
		t.Fatalf("lost with %v, want ErrReplicaSync", l.Err)
	}
	// The undo's own reply may be unsynced too: it counts as it is.
	d.step(Msg{Kind: MsgReply, Op: rel.Op, Reply: []int64{0}, Fault: Unsynced, Err: ErrReplicaSync})
	if !d.m.Idle() {
		t.Fatal("not idle after the undo")
	}
}

// TestUnsyncedHeldReplyWaits: an attempt that found the lock held, with too
// few acks, is an ordinary Held: the request keeps waiting.
func TestUnsyncedHeldReplyWaits(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:a", -1), EffAcquire)
	msg := held(acq.Op, 5*time.Second)
	msg.Fault, msg.Err = Unsynced, ErrReplicaSync
	effs := d.step(msg)
	none(t, effs, EffLost)
	none(t, effs, EffAcquired)
	if d.m.Idle() {
		t.Fatal("the waiting request is gone")
	}
}
