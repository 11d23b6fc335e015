package lockactor

import (
	"context"
	"fmt"
	"time"

	"github.com/holdfast/holdfast/scripts"
)

// ReqID names one Lock call (a request) within a Machine.
type ReqID uint64

// Request is one Lock call as the machine sees it.
type Request struct {
	ID    ReqID
	Field string        // hash field of the owner: CLIENTID:INSTANCE:OWNER
	Lease time.Duration // lease written to Redis
	// args keeps the arguments of the request's acquire calls (see
	// callArgs), for a kind whose Acquire uses it.
	args callArgs
	// Wait is the wait budget: < 0 waits until the lock is granted or the
	// request is cancelled, 0 tries once, > 0 gives up after that long.
	Wait time.Duration
	// Kind is the kind of lock asked for; nil is Reentrant. A machine serves
	// one kind at a time: a request of another kind while it is busy ends
	// with ErrWrongKind at once, as Redis would refuse it.
	Kind *Kind
	// Watchdog asks for renewal every Lease/3 while held. Without it the hold
	// ends at its validity deadline (a fixed lease).
	Watchdog bool
	// Mode is kind-defined (the read-write lock's read or write); 0 for
	// kinds with one mode.
	Mode uint8
	// Value is kind-defined: what an election's candidate announces
	// (Election); "" for the other kinds. Only a fresh grant reads it, so a
	// held request that slept (Dormant) does not keep it.
	Value string
}

// Handle is the caller's side of one request. The runtime calls its
// methods as it carries out EffAcquired, EffDeadline, EffReleaseDone and
// EffLost, in order, never concurrently; they must not block.
type Handle interface {
	Acquired(token uint64, deadline time.Time)
	SetDeadline(deadline time.Time)
	// ReleaseDone answers a Release; it precedes Lost when the release is
	// what ended the request. When the release's first call fails it is
	// called early with an error wrapping ErrReleaseUnconfirmed, and again
	// with the settling answer.
	ReleaseDone(err error)
	// Lost is called exactly once, last.
	Lost(err error)
}

// Giver is a Handle that can give its request's ID and owner field again
// (Request.ID, Request.Field; the field built when asked for): the actor
// runtime puts a quiet hold to sleep only then, and its record keeps
// neither (Machine.Sleep).
type Giver interface {
	RequestID() ReqID
	OwnerField() string
}

// Binder is a Handle that keeps its request's Ref (a Lock's, whose name
// comes from its Ref's Sender, see Namer). A runtime's Enqueue gives it the
// Ref it returns (Bind), on the caller's goroutine, before the request can
// reach the machine: the Handle's methods then see it.
type Binder interface {
	Bind(r Ref)
}

// Bind gives h the Ref r if h is a Binder.
func Bind(h Handle, r Ref) {
	if b, ok := h.(Binder); ok {
		b.Bind(r)
	}
}

// Namer is a Sender that knows the lock name of the requests it serves.
type Namer interface {
	Name() string
}

// Ref addresses the machine of one request: its runtime's Sender and the
// request's ID. It is a plain value, so keeping one allocates nothing.
// The zero Ref addresses nothing (To is nil).
type Ref struct {
	To Sender
	ID ReqID
}

// Send delivers Msg{Kind: kind, ID: r.ID, Err: err} to the request's
// machine (MsgCancel, MsgRelease).
func (r Ref) Send(kind MsgKind, err error) { r.To.Send(r.ID, kind, err) }

// Sender delivers messages about requests to their machine: one per
// machine (or per runtime), shared by the machine's requests.
type Sender interface {
	Send(id ReqID, kind MsgKind, err error)
}

// Driver is implemented by a Sender whose runtime runs on the caller's
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
	// MsgReply: the reply to EffCall (Msg.Op, Msg.Reply, Msg.Fault, Msg.Err).
	MsgReply
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
	// Unsynced: the call ran and Msg.Reply holds its reply, but fewer
	// replicas than asked (Config.SyncReplicas) acknowledged it in time;
	// Msg.Err wraps ErrReplicaSync. A grant so answered is undone and its
	// request ends with Msg.Err; any other reply counts as it is.
	Unsynced
)

// Msg is one input of Step. Only the fields its Kind names are meaningful.
type Msg struct {
	Kind    MsgKind
	Req     Request
	ID      ReqID
	Op      uint64
	Err     error
	Fault   Fault
	Reply   []int64 // the script's reply: one element for an integer reply
	Renewed bool
	Sent    time.Time
	Timer   TimerKey
}

// EffectKind tells which output an Effect is.
type EffectKind uint8

// Outputs of Step, to be carried out by the runtime in order.
const (
	// EffCall: run Call; reply with MsgReply carrying Op. Field, when set,
	// is an owner field the call may grant: a runtime that loses the
	// machine's state (a crash) releases it with the kind's Release.
	EffCall EffectKind = iota + 1
	// EffRenew: renew Field's lease on Key with the batch script Script
	// (batched by the watchdog); reply with MsgRenewReply carrying Op and the
	// time before the batch was sent. It also keeps waiters' places alive
	// (Kind.KeepAlive).
	EffRenew
	// EffSchedule: fire MsgTimer{Timer} at At (never before). Replaces a
	// pending timer with the same key.
	EffSchedule
	// EffCancelTimer: drop the pending timer with key Timer, if any.
	EffCancelTimer
	// EffSubscribe / EffUnsubscribe: start or end interest in Channel (one at
	// a time per machine). Subscribe is answered by MsgSubscribed; Wake and
	// Resync follow.
	EffSubscribe
	EffUnsubscribe
	// EffAcquired: request ID is held with Token until At.
	EffAcquired
	// EffDeadline: request ID's validity deadline moved to At.
	EffDeadline
	// EffLost: request ID is over; Err says why. Emitted exactly once per request.
	EffLost
	// EffReleaseDone: answer the Release call of request ID with Err (nil
	// when Redis confirmed). Emitted before the request's EffLost; an
	// interim one (Err wraps ErrReleaseUnconfirmed) may come first.
	EffReleaseDone
)

// Effect is one output of Step. Only the fields its Kind names are meaningful.
type Effect struct {
	Kind    EffectKind
	ID      ReqID
	Op      uint64
	Call    scripts.Call
	Script  *scripts.Script // EffRenew
	Key     string          // EffRenew
	Channel string          // EffSubscribe, EffUnsubscribe
	Field   string
	Lease   time.Duration
	Token   uint64
	At      time.Time
	Timer   TimerKey
	Err     error
}

// TimerKind tells what a timer is for.
type TimerKind uint8

// Timers of a machine.
const (
	TimerWait      TimerKind = iota + 1 // a request's wait budget ran out (ID = request)
	TimerRetry                          // retry the head waiter's attempt (ID = 0)
	TimerRenew                          // renew an owner's hold (ID = owner generation)
	TimerDeadline                       // an owner's validity deadline is here (ID = owner generation)
	TimerOpRetry                        // repeat an owner's failed acquire/release (ID = owner generation)
	TimerKeepAlive                      // keep the queued head waiter's place (Kind.KeepAlive; ID = 0)
)

// TimerKey identifies one timer of a machine.
type TimerKey struct {
	Kind TimerKind
	ID   uint64
}

func (k MsgKind) String() string {
	names := [...]string{"?", "enqueue", "cancel", "release", "shutdown", "reply",
		"renew-reply", "timer", "wake", "subscribed", "resync"}
	if int(k) < len(names) {
		return names[k]
	}
	return fmt.Sprintf("MsgKind(%d)", k)
}

func (k EffectKind) String() string {
	names := [...]string{"?", "call", "renew", "schedule", "cancel-timer",
		"subscribe", "unsubscribe", "acquired", "deadline", "lost", "release-done"}
	if int(k) < len(names) {
		return names[k]
	}
	return fmt.Sprintf("EffectKind(%d)", k)
}
