package lockactor

import (
	"strings"
	"testing"

	"github.com/holdfast/holdfast/scripts"
)

// A fresh request whose owner field Redis already counts (a grant given up
// after an unanswered call whose undo never arrived, or a field written by
// someone else) ends at once, leaves that hold alone, and says what can
// cause it: not a shared ClientID, which owner fields' random INSTANCE rules
// out.
func TestUnknownCountEndsTheRequestAndNamesItsCauses(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:i:~1", -1), EffAcquire)
	effs := d.step(Msg{Kind: MsgReply, Op: acq.Op, Reply: []int64{scripts.AcquireMismatch, 2}})
	lost := one(t, effs, EffLost)
	none(t, effs, EffRelease)
	msg := lost.Err.Error()
	for _, says := range []string{`"c:i:~1"`, "2 times", "given up", "another writer"} {
		if !strings.Contains(msg, says) {
			t.Errorf("error %q does not say %q", msg, says)
		}
	}
	if strings.Contains(msg, "ClientID") {
		t.Errorf("error %q blames the ClientID", msg)
	}
	if !d.m.Idle() {
		t.Fatal("not idle")
	}
}
