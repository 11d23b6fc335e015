package lockactor

import (
	"errors"
	"testing"
	"time"
)

// A release whose first call fails is answered at once with
// ErrReleaseUnconfirmed (an interim answer: composites stop waiting for a
// node that is down), repeated in the background, and answered again, with
// Lost, when Redis confirms it.
func TestFailedReleaseIsAnsweredEarlyAndRepeated(t *testing.T) {
	d := holdOne(t)
	rel := one(t, d.step(Msg{Kind: MsgRelease, ID: 1}), EffRelease)
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	effs := d.step(Msg{Kind: MsgReply, Op: rel.Op, Fault: Ambiguous, Err: refused})
	rd := one(t, effs, EffReleaseDone)
	if !errors.Is(rd.Err, ErrReleaseUnconfirmed) || !errors.Is(rd.Err, refused) {
		t.Fatalf("interim answer %v, want ErrReleaseUnconfirmed wrapping the call's error", rd.Err)
	}
	none(t, effs, EffLost)
	none(t, effs, EffRenew)
	retry := one(t, effs, EffSchedule)
	if retry.Timer.Kind != TimerOpRetry {
		t.Fatalf("scheduled %+v, want the release's retry", retry.Timer)
	}

	// The repeat fails too: no second interim answer.
	d.now = retry.At
	rel = one(t, d.step(Msg{Kind: MsgTimer, Timer: retry.Timer}), EffRelease)
	effs = d.step(Msg{Kind: MsgReply, Op: rel.Op, Fault: Ambiguous, Err: refused})
	none(t, effs, EffReleaseDone)
	none(t, effs, EffLost)

	// The next one is confirmed: the settling answer, then Lost.
	retry = one(t, effs, EffSchedule)
	d.now = retry.At
	rel = one(t, d.step(Msg{Kind: MsgTimer, Timer: retry.Timer}), EffRelease)
	effs = d.step(Msg{Kind: MsgReply, Op: rel.Op, Reply: []int64{0}})
	if rd := one(t, effs, EffReleaseDone); rd.Err != nil {
		t.Fatalf("settling answer %v, want nil", rd.Err)
	}
	if l := one(t, effs, EffLost); !errors.Is(l.Err, ErrReleased) {
		t.Fatalf("lost %v, want ErrReleased", l.Err)
	}
	if indexOf(effs, EffReleaseDone) > indexOf(effs, EffLost) {
		t.Fatal("Lost before the settling answer")
	}
}

// A release that never gets through is settled at the lease's end: the
// interim answer first, the settling one with Lost at the deadline.
func TestUnconfirmedReleaseSettlesAtTheDeadline(t *testing.T) {
	d := holdOne(t)
	deadline := d.m.owners[0].deadline
	rel := one(t, d.step(Msg{Kind: MsgRelease, ID: 1}), EffRelease)
	timeout := errors.New("context deadline exceeded")
	effs := d.step(Msg{Kind: MsgReply, Op: rel.Op, Fault: Ambiguous, Err: timeout})
	if rd := one(t, effs, EffReleaseDone); !errors.Is(rd.Err, ErrReleaseUnconfirmed) {
		t.Fatalf("interim answer %v", rd.Err)
	}
	d.now = deadline.Add(-10 * time.Millisecond) // the deadline timer, Slack early
	effs = d.step(Msg{Kind: MsgTimer, Timer: TimerKey{TimerDeadline, d.m.owners[0].gen}})
	rd := one(t, effs, EffReleaseDone)
	if rd.Err == nil || errors.Is(rd.Err, ErrReleaseUnconfirmed) {
		t.Fatalf("settling answer %v, want the hold's end", rd.Err)
	}
	one(t, effs, EffLost)
}
