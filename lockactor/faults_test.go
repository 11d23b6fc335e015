package lockactor

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Faults: what a request ends with when Redis fails.

func TestPermanentReplyEndsWithErrRedis(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:a", -1), EffAcquire)
	denied := errors.New("NOPERM User u has no permissions to run the 'hincrby' command")
	effs := d.step(Msg{Kind: MsgReply, Op: acq.Op, Fault: Permanent, Err: denied})
	l := one(t, effs, EffLost)
	if !errors.Is(l.Err, ErrRedis) || !errors.Is(l.Err, denied) || !strings.Contains(l.Err.Error(), "'hincrby'") {
		t.Fatalf("lost %v, want ErrRedis wrapping the server's reply", l.Err)
	}
	none(t, effs, EffSchedule) // no retry
}

func TestPermanentRenewalFailureEndsTheHold(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:a", -1), EffAcquire)
	d.step(granted(acq.Op, 1, 1))
	gen := d.m.owners[0].gen
	d.now = t0.Add(lease / 3)
	r := one(t, d.step(Msg{Kind: MsgTimer, Timer: TimerKey{TimerRenew, gen}}), EffRenew)
	denied := errors.New("NOPERM User u has no permissions to run the 'pexpire' command")
	effs := d.step(Msg{Kind: MsgRenewReply, Op: r.Op, Sent: d.now, Fault: Permanent, Err: denied})
	if l := one(t, effs, EffLost); !errors.Is(l.Err, ErrRedis) || !errors.Is(l.Err, denied) {
		t.Fatalf("lost %v, want ErrRedis wrapping the reply", l.Err)
	}
}

func TestExpiredLeaseWrapsTheLastRenewalError(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:a", -1), EffAcquire)
	effs := d.step(granted(acq.Op, 1, 1))
	var deadline TimerKey
	var deadlineAt time.Time
	for _, e := range effs {
		if e.Kind == EffSchedule && e.Timer.Kind == TimerDeadline {
			deadline, deadlineAt = e.Timer, e.At
		}
	}
	gen := d.m.owners[0].gen
	d.now = t0.Add(lease / 3)
	r := one(t, d.step(Msg{Kind: MsgTimer, Timer: TimerKey{TimerRenew, gen}}), EffRenew)
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	effs = d.step(Msg{Kind: MsgRenewReply, Op: r.Op, Sent: d.now, Fault: Ambiguous, Err: refused})
	none(t, effs, EffLost) // retried within the lease
	d.now = deadlineAt
	l := one(t, d.step(Msg{Kind: MsgTimer, Timer: deadline}), EffLost)
	if !errors.Is(l.Err, ErrLeaseExpired) || !errors.Is(l.Err, refused) {
		t.Fatalf("lost %v, want ErrLeaseExpired wrapping the last renewal error", l.Err)
	}
	if want := "last renewal error: dial tcp"; !strings.Contains(l.Err.Error(), want) {
		t.Fatalf("lost %q, want it to contain %q", l.Err, want)
	}
}

func TestSpentWaitWrapsTheLastAttemptError(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:a", time.Second), EffAcquire)
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	effs := d.step(Msg{Kind: MsgReply, Op: acq.Op, Fault: Transient, Err: refused})
	none(t, effs, EffLost)
	d.now = t0.Add(time.Second)
	l := one(t, d.step(Msg{Kind: MsgTimer, Timer: TimerKey{TimerWait, 1}}), EffLost)
	if !errors.Is(l.Err, ErrWaitTimeout) || !errors.Is(l.Err, refused) {
		t.Fatalf("lost %v, want ErrWaitTimeout wrapping the last attempt's error", l.Err)
	}
}

func TestAnsweredAttemptForgetsTheError(t *testing.T) {
	d := newDriver(t)
	acq := one(t, d.enqueue(1, "c:a", time.Second), EffAcquire)
	d.step(Msg{Kind: MsgReply, Op: acq.Op, Fault: Transient, Err: errors.New("LOADING")})
	d.now = t0.Add(500 * time.Millisecond)
	acq = one(t, d.step(Msg{Kind: MsgTimer, Timer: TimerKey{TimerRetry, 0}}), EffAcquire)
	d.step(held(acq.Op, 10*time.Second))
	d.now = t0.Add(time.Second)
	l := one(t, d.step(Msg{Kind: MsgTimer, Timer: TimerKey{TimerWait, 1}}), EffLost)
	if l.Err != ErrWaitTimeout {
		t.Fatalf("lost %v, want plain ErrWaitTimeout: Redis answered after the error", l.Err)
	}
}
