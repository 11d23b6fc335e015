package lockactor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holdfast/holdfast/scripts"
)

// ReqID names one Lock call (a request) within a Machine.
type ReqID uint64

// Request is one Lock call as the machine sees it.
type Request struct {
	ID    ReqID
	Field string        // hash field of the owner: CLIENTID:OWNER
	Lease time.Duration // lease written to Redis
	// Watchdog asks for renewal every Lease/3 while held. Without it the hold
	// ends at its validity deadline (a fixed lease).
	Watchdog bool
	// Wait is the wait budget: < 0 waits until the lock is granted or the
	// request is cancelled, 0 tries once, > 0 gives up after that long.
	Wait time.Duration
}

// Handle is the caller's side of one request. The runtime calls its
// methods as it carries out EffAcquired, EffDeadline, EffReleaseDone and
// EffLost, in order, never concurrently; they must not block.
type Handle interface {
	Acquired(token uint64, deadline time.Time)
	SetDeadline(deadline time.Time)
	// ReleaseDone answers a Release; it precedes Lost when the release is
	// what ended the request.
	ReleaseDone(err error)
	// Lost is called exactly once, last.
	Lost(err error)
}

// Ref addresses the machine of one request: the runtime delivers
// Msg{Kind: kind, ID: the request, Err: err} to it (MsgCancel, MsgRelease).
type Ref interface {
	Send(kind MsgKind, err error)
}

// Driver is implemented by a Ref whose runtime runs on the caller's
// goroutine (the simulator): a blocking call drives the runtime until done
// is closed or ctx ends, instead of waiting for other goroutines.
type Driver interface {
	Drive(ctx context.Context, done ...<-chan struct{})
}

// MsgKind tells which input a Msg is.
type MsgKind uint8

// Inputs of Step.
const (
	// MsgEnqueue: a new Lock call (Msg.Req).
	MsgEnqueue MsgKind = iota + 1
	// MsgCancel: the Lock's context ended (Msg.ID, Msg.Err is the cause).
	// A pending request gives up; a held one is released and ends with Err.
	MsgCancel
	// MsgRelease: the caller released (Msg.ID). Answered by EffReleaseDone.
	MsgRelease
	// MsgShutdown: the client is closing. Every request ends with Msg.Err; held
	// ones are released with one attempt each, without retries.
	MsgShutdown
	// MsgAcquireReply: the reply to EffAcquire (Msg.Op, Msg.Acquire, Msg.Fault).
	MsgAcquireReply
	// MsgReleaseReply: the reply to EffRelease (Msg.Op, Msg.Left, Msg.Fault).
	MsgReleaseReply
	// MsgRenewReply: the reply to EffRenew (Msg.Op is the owner generation,
	// Msg.Sent the clock time before the renewal was sent, Msg.Renewed, Msg.Fault).
	MsgRenewReply
	// MsgTimer: a timer set by EffSchedule fired (Msg.Timer). The runtime
	// delivers only the current firing of a key: a key rescheduled or
	// cancelled before it fired is not delivered.
	MsgTimer
	// MsgWake: a release was announced on the lock's channel.
	MsgWake
	// MsgSubscribed: the subscription asked for by EffSubscribe is confirmed.
	MsgSubscribed
	// MsgResync: the pub/sub connection was re-established; announcements may
	// have been missed, so waiters re-check Redis at once.
	MsgResync
	// MsgHandoffReply: the reply to EffHandoff (Msg.Op, Msg.Left for the
	// release, Msg.Acquire for the acquire, Msg.Fault).
	MsgHandoffReply
)

// Fault classifies a failed Redis call.
type Fault uint8

const (
	// NoFault: the call succeeded.
	NoFault Fault = iota
	// Transient: Redis refused the call before it changed anything (OOM,
	// READONLY after a failover, LOADING, BUSY…); it may succeed if repeated.
	Transient
	// Ambiguous: the call may or may not have run (timeout, connection lost
	// after the request was written). Every script is idempotent when repeated
	// with the same arguments, so the outcome is learned by repeating it.
	Ambiguous
	// Permanent: Redis refused the call and will refuse it again (WRONGTYPE:
	// the lock key holds something that is not a lock).
	Permanent
	// Demoted: the node refused a write as a replica (READONLY): a failover
	// demoted it, and the promoted replica may grant the lock to others. A
	// renewal that meets it ends the hold at once (ErrFailover); other calls
	// treat it as Transient.
	Demoted
)

// AcquireResult is the decoded reply of the acquire script.
type AcquireResult struct {
	Code  int64  // scripts.AcquireGranted, AcquireHeld or AcquireMismatch
	Count int64  // reentry count after the grant, or the count found (mismatch)
	Token uint64 // fencing token, when granted
	PTTL  time.Duration
}

// DecodeAcquire decodes the acquire script's integer array reply.
func DecodeAcquire(vals []int64) (AcquireResult, error) {
	if len(vals) < 2 {
		return AcquireResult{}, errMalformedAcquire
	}
	res := AcquireResult{Code: vals[0]}
	switch vals[0] {
	case scripts.AcquireGranted:
		if len(vals) < 3 {
			return res, errMalformedAcquire
		}
		res.Count, res.Token = vals[1], uint64(vals[2])
	case scripts.AcquireHeld:
		res.PTTL = time.Duration(vals[1]) * time.Millisecond
	default:
		res.Count = vals[1]
	}
	return res, nil
}

var errMalformedAcquire = errors.New("holdfast: malformed acquire reply")

// DecodeHandoff decodes the handoff script's integer array reply: the
// release's outcome, then the acquire's.
func DecodeHandoff(vals []int64) (left int64, acquire AcquireResult, err error) {
	if len(vals) < 3 {
		return 0, AcquireResult{}, errMalformedAcquire
	}
	acquire, err = DecodeAcquire(vals[1:])
	return vals[0], acquire, err
}

// Msg is one input of Step. Only the fields its Kind names are meaningful.
type Msg struct {
	Kind    MsgKind
	Req     Request
	ID      ReqID
	Op      uint64
	Err     error
	Fault   Fault
	Acquire AcquireResult
	Left    int64
	Renewed bool
	Sent    time.Time
	Timer   TimerKey
}

// EffectKind tells which output an Effect is.
type EffectKind uint8

// Outputs of Step, to be carried out by the runtime in order.
const (
	// EffAcquire: run the acquire script for Field with Lease and Expected;
	// reply with MsgAcquireReply carrying Op.
	EffAcquire EffectKind = iota + 1
	// EffRelease: run the release script for Field with Expected; reply with
	// MsgReleaseReply carrying Op.
	EffRelease
	// EffRenew: renew Field's lease (batched by the watchdog); reply with
	// MsgRenewReply carrying Op and the time before the batch was sent.
	EffRenew
	// EffSchedule: fire MsgTimer{Timer} at At (never before). Replaces a
	// pending timer with the same key.
	EffSchedule
	// EffCancelTimer: drop the pending timer with key Timer, if any.
	EffCancelTimer
	// EffSubscribe / EffUnsubscribe: start or end interest in the lock's
	// channel. Subscribe is answered by MsgSubscribed; Wake and Resync follow.
	EffSubscribe
	EffUnsubscribe
	// EffAcquired: request ID is held with Token until At.
	EffAcquired
	// EffDeadline: request ID's validity deadline moved to At.
	EffDeadline
	// EffLost: request ID is over; Err says why. Emitted exactly once per request.
	EffLost
	// EffReleaseDone: answer the Release call of request ID with Err (nil
	// when Redis confirmed). Emitted before the request's EffLost.
	EffReleaseDone
	// EffHandoff: run the handoff script, releasing Field (count 1) and
	// acquiring To with Lease in one call; reply with MsgHandoffReply
	// carrying Op.
	EffHandoff
)

// Effect is one output of Step. Only the fields its Kind names are meaningful.
type Effect struct {
	Kind     EffectKind
	ID       ReqID
	Op       uint64
	Field    string
	To       string
	Lease    time.Duration
	Expected int64
	Token    uint64
	At       time.Time
	Timer    TimerKey
	Err      error
}

// TimerKind tells what a timer is for.
type TimerKind uint8

// Timers of a machine.
const (
	TimerWait     TimerKind = iota + 1 // a request's wait budget ran out (ID = request)
	TimerRetry                         // retry the head waiter's attempt (ID = 0)
	TimerRenew                         // renew an owner's hold (ID = owner generation)
	TimerDeadline                      // an owner's validity deadline is here (ID = owner generation)
	TimerOpRetry                       // repeat an owner's failed acquire/release (ID = owner generation)
)

// TimerKey identifies one timer of a machine.
type TimerKey struct {
	Kind TimerKind
	ID   uint64
}

func (k MsgKind) String() string {
	names := [...]string{"?", "enqueue", "cancel", "release", "shutdown", "acquire-reply",
		"release-reply", "renew-reply", "timer", "wake", "subscribed", "resync", "handoff-reply"}
	if int(k) < len(names) {
		return names[k]
	}
	return fmt.Sprintf("MsgKind(%d)", k)
}

func (k EffectKind) String() string {
	names := [...]string{"?", "acquire", "release", "renew", "schedule", "cancel-timer",
		"subscribe", "unsubscribe", "acquired", "deadline", "lost", "release-done", "handoff"}
	if int(k) < len(names) {
		return names[k]
	}
	return fmt.Sprintf("EffectKind(%d)", k)
}
