package lockactor

import (
	"errors"
	"time"

	"github.com/holdfast/holdfast/scripts"
)

// Kind is the policy of one kind of lock: the scripts its requests run, how
// their replies decode, which local requests may try for the lock together,
// and which channel wakes its waiters. The kernel (Machine) does everything
// else the same way for every kind. A Kind is a table of plain functions
// with no state of its own; each kind is one value in its own file
// (kind_lock.go, kind_fair.go, …). A field left nil means the kind does not
// use that feature; the comments say what the kernel does then.
type Kind struct {
	// Name is the kind's name as Redis marks it and Inspect reports it.
	Name string
	// Permits is the permit count of a semaphore kind (Semaphore), 0 for
	// the others. Kinds of one Name and different Permits do not mix: a
	// request of one ends with ErrPermits on a machine serving the other.
	Permits int

	// HoldField, when set, gives the field a request of mode holds under,
	// from its owner field (CLIENTID:INSTANCE:OWNER): the read-write lock keeps an
	// owner's read and write holds apart. Nil: the owner field.
	HoldField func(ownerField string, mode uint8) string

	// Acquire builds the call that grants r to its owner field: fresh when
	// expected is 0, a reentry of a hold of count expected otherwise.
	// Repeating the same call must be harmless (see Fault Ambiguous).
	Acquire func(env Env, r *Request, expected int64) scripts.Call
	// DecodeAcquire turns the acquire call's reply into an outcome.
	DecodeAcquire func(reply []int64) (AcquireResult, error)
	// HoldToken: a reentry's reply carries the token stored with the hold
	// itself (not the fence counter's current value), so a reentry answered
	// with another token met another hold of the same field — an older one
	// a failover's roll-back brought back — and this owner's hold is gone.
	HoldToken bool
	// Release builds the call that gives back one reentry of field's hold
	// (expected is the count the owner holds before it; 0 removes the field
	// whatever its count, and whatever else Redis keeps for it, such as a
	// place in a queue).
	Release func(env Env, field string, expected int64) scripts.Call
	// DecodeRelease turns the release call's reply into the owner's count
	// after it, or ReleaseNotOwner / ReleaseMismatch.
	DecodeRelease func(reply []int64) (int64, error)

	// Handoff builds the call that releases from's hold (count 1) and
	// grants to in one round trip; nil turns local handoff off for the kind.
	Handoff func(env Env, from string, to *Request) scripts.Call
	// DecodeHandoff decodes the handoff's reply: the release's outcome, then
	// the acquire's.
	DecodeHandoff func(reply []int64) (left int64, acquire AcquireResult, err error)

	// Renew is the batch script that renews holds (see renewal): one key and
	// a field, lease-ms argument pair per hold; 1 renewed, 0 not held.
	Renew *scripts.Script
	// RenewKey is the key Renew is called on for the lock name; nil: the
	// lock hash, scripts.LockKey.
	RenewKey func(name string) string
	// KeepAlive, when set, is the batch script that keeps a waiter's place in
	// a queue kept by Redis (same shape as Renew; 1 still queued, 0 not
	// queued any more). Every waiter with a place (see Place) is then kept
	// alive every Config.WaiterTimeout/3 while it waits, ends its place with
	// Release (expected 1) when it gives up, and, when its place is gone,
	// tries again at once if it heads the local queue (it may have been
	// granted the lock) or takes a new place. Nil: waiters leave nothing in
	// Redis.
	KeepAlive *scripts.Script
	// KeepAliveKey is the key KeepAlive is called on for the lock name.
	KeepAliveKey func(name string) string
	// Place builds the call that gives the requests rs (in their local
	// order) places at the end of the queue without taking the lock; it
	// replies as Acquire, Held once they have their places. Every local
	// waiter takes its place when it arrives, so that the queue in Redis
	// holds the waiters of every client in the order they asked; the head
	// of the local queue then confirms its grant with Acquire. Nil with
	// KeepAlive set: a waiter's place is the one its refused Acquire left
	// (the read-write lock's writer claim), kept alive the same way.
	Place func(env Env, rs []*Request) scripts.Call
	// Queues, when set, tells which requests keep a place in Redis while
	// they wait (with KeepAlive): the read-write lock's writers leave a
	// claim there, its readers nothing. Nil: every request.
	Queues func(r *Request) bool

	// Channel is the pub/sub channel whose messages wake this client's
	// waiters of the name (clientID is the owner fields' prefix).
	Channel func(name, clientID string) string
	// HeadChannel: the name wakes each waiter on a channel of its own
	// (Redisson's fair lock). Channel is then given the owner field of the
	// head of the local queue instead of a client id, and the subscription
	// follows the head as it changes; its confirmation makes the new head
	// look once, for a message sent before it listened.
	HeadChannel bool
	// MayAttempt reports whether the local request at the head of the queue
	// may try for the lock now, given the holds this client has on the name
	// (one per owner field; holds yields them). Nil: only when this client
	// holds nothing, as for an exclusive lock, and a try-once request
	// (Wait 0) queued behind an attempt in flight fails at once; with a
	// MayAttempt it waits for its own turn to try.
	MayAttempt func(head *Request, holds func(yield func(Hold) bool)) bool
	// Jump reports whether a new request goes to the front of the local
	// queue, and tries at once, instead of waiting behind the requests
	// already queued: a request the name grants whatever waits (the
	// read-write lock's write → read), which a waiter ahead of it could
	// otherwise wait for. Nil: none does.
	Jump func(r *Request, holds func(yield func(Hold) bool)) bool
	// Ahead reports whether request r goes ahead of request q, queued
	// before it in the local queue: the read-write lock's writers pass its
	// waiting readers, so that a writer never waits behind a reader that
	// writer preference holds back. The kernel moves r only past requests
	// that wait with no call of theirs that may have granted them (not the
	// attempt in flight, not one whose try got no answer), keeps the
	// requests r passes in their order, and lets a new head try at once.
	// Nil: the queue is first come, first served.
	Ahead func(r, q *Request, holds func(yield func(Hold) bool)) bool
	// YieldAfterRelease: when a hold's final release leaves local waiters
	// behind, they wait for the release's announcement (or Config.Backoff)
	// before trying, so that other processes' waiters compete on equal
	// terms. Kinds whose Redis side grants in order do not need it.
	YieldAfterRelease bool
}

// Env is what a kind's call builders know besides the request.
type Env struct {
	Name string
	Cfg  *Config
	// Waiters: this client has requests queued on the name, which listen
	// for the announcement of a release (set for Release calls).
	Waiters bool
	// Behind: for the fresh Acquire of the head of the local queue, with a
	// Place, the owner fields of the live waiters queued behind it (they
	// asked after it). Redis may grant one of them first (their places can
	// reach the queue out of the local order); the head takes such a grant
	// in their stead, and the one it was meant for keeps its turn.
	Behind []string
	// keys are the reentrant lock's KEYS, made once per machine so that a
	// cycle does not build its key strings again (nil: built per call).
	keys *lockKeys
	// args: for a Release call, the owner's place to keep the call's
	// arguments in (see callArgs; nil: none).
	args *callArgs
}

// Hold is one owner field's hold on the name, as MayAttempt sees it.
type Hold struct {
	Field string
	Mode  uint8 // the Mode of the request that first granted it
	Count int64
	// Undo: no request holds through it; it is a grant for a request that
	// gave up, on its way back to Redis.
	Undo bool
}

// Outcomes of an acquire call (AcquireResult.Code).
const (
	// Granted: the owner holds the lock with Count reentries and Token.
	Granted = 1
	// Held: not granted now; sleep until a wake-up or PTTL has passed.
	Held = 0
	// Mismatch: the owner's count in Redis (Count) is not what the caller
	// believed.
	Mismatch = -1
	// Refused: the kind refuses the request for good (AcquireResult.Err says
	// why, e.g. ErrWrongKind); nothing changed in Redis.
	Refused = -2
)

// AcquireResult is the decoded reply of an acquire call.
type AcquireResult struct {
	Code  int64  // Granted, Held, Mismatch or Refused
	Count int64  // reentry count after the grant, or the count found (Mismatch)
	Token uint64 // fencing token, when granted
	PTTL  time.Duration
	Err   error // why, when Refused
}

var errMalformedReply = errors.New("holdfast: malformed script reply")

// kindOf returns the kind of r, the reentrant lock when it names none.
func kindOf(r *Request) *Kind {
	if r.Kind != nil {
		return r.Kind
	}
	return Reentrant
}
