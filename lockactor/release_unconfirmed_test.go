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

// With a ReleaseBound, failed tries are repeated within it, the last one at
// the bound, and only a try that fails at or past the bound answers
// ErrReleaseUnconfirmed: a failover that ends within the bound confirms the
// release instead.
func TestReleaseBoundRepeatsTriesBeforeTheInterimAnswer(t *testing.T) {
	const bound = time.Second
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	start := func(t *testing.T) (*driver, time.Time) {
		d := holdOne(t)
		d.m.cfg.ReleaseBound = bound
		return d, d.now.Add(bound)
	}

	t.Run("confirmed within the bound", func(t *testing.T) {
		d, _ := start(t)
		rel := one(t, d.step(Msg{Kind: MsgRelease, ID: 1}), EffRelease)
		effs := d.step(Msg{Kind: MsgReply, Op: rel.Op, Fault: Ambiguous, Err: refused})
		none(t, effs, EffReleaseDone)
		retry := one(t, effs, EffSchedule)
		d.now = retry.At
		rel = one(t, d.step(Msg{Kind: MsgTimer, Timer: retry.Timer}), EffRelease)
		effs = d.step(Msg{Kind: MsgReply, Op: rel.Op, Reply: []int64{0}})
		if rd := one(t, effs, EffReleaseDone); rd.Err != nil {
			t.Fatalf("answer %v, want nil: the release was confirmed within the bound", rd.Err)
		}
		one(t, effs, EffLost)
	})

	t.Run("never confirmed", func(t *testing.T) {
		d, deadline := start(t)
		rel := one(t, d.step(Msg{Kind: MsgRelease, ID: 1}), EffRelease)
		tries := 1
		for {
			effs := d.step(Msg{Kind: MsgReply, Op: rel.Op, Fault: Ambiguous, Err: refused})
			if i := indexOf(effs, EffReleaseDone); i >= 0 {
				if d.now.Before(deadline) {
					t.Fatalf("interim answer at %v, before the bound %v", d.now.Sub(t0), deadline.Sub(t0))
				}
				if !errors.Is(effs[i].Err, ErrReleaseUnconfirmed) || !errors.Is(effs[i].Err, refused) {
					t.Fatalf("interim answer %v, want ErrReleaseUnconfirmed wrapping the call's error", effs[i].Err)
				}
				none(t, effs, EffLost)
				break
			}
			// The next try is never set past the bound.
			var retry Effect
			for _, e := range effs {
				if e.Kind == EffSchedule && e.Timer.Kind == TimerOpRetry {
					retry = e
				}
			}
			if retry.Kind == 0 {
				t.Fatalf("try %d failed with no retry and no answer", tries)
			}
			if retry.At.After(deadline) {
				t.Fatalf("retry at %v, past the bound %v", retry.At.Sub(t0), deadline.Sub(t0))
			}
			d.now = retry.At
			rel = one(t, d.step(Msg{Kind: MsgTimer, Timer: retry.Timer}), EffRelease)
			if tries++; tries > 20 {
				t.Fatal("no answer after 20 tries")
			}
		}
		if tries < 3 {
			t.Fatalf("%d tries within the bound, want the backoff's several", tries)
		}
	})
}
