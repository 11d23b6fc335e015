package holdfast

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/holdfast/holdfast/internal/observe"
	"github.com/holdfast/holdfast/lockactor"
)

// Lock is one Lock call: pending, then held, then over. Its channels are the
// way to follow it; its methods are safe for concurrent use. Get one from
// Client.Lock: the methods of a zero or nil Lock never panic, Wait and
// Release answer ErrInvalidOption and Err says the same.
type Lock struct {
	// Acquired is closed once the lock is held. It is never closed if the
	// Lock ends before being granted. Its closer is the lock's actor.
	Acquired <-chan struct{}
	// Lost is closed once this Lock is over, for any reason: acquisition gave
	// up, the hold was lost, or Release finished. Err then says why. A
	// goroutine selecting on Lost is never stranded. Its closer is the lock's
	// actor (or Lock itself for a Lock that never started).
	Lost <-chan struct{}

	// ref addresses the Lock's machine, and its Sender knows the lock's
	// name (lockactor.Namer): the Lock keeps no copy. It is written before
	// the Lock is returned and before its machine can call the handle
	// (handle.Bind), and never again.
	ref      lockactor.Ref
	token    atomic.Uint64
	deadline atomic.Int64 // UnixNano
	// c is the Client of a Lock that started (nil otherwise): its Observer
	// notes the Lock's grant and end, and it builds the owner field a log
	// line names (ownerField). times are the Lock's, with metrics only.
	c     *Client
	times *observe.Times

	mu   sync.Mutex // guards the fields below but held
	over bool
	// released: over by its Release, Err is ErrReleased; relAnswered:
	// Release has its answer, x.relErr (nil without x). Kept apart from x
	// so that a Lock taken and released makes none.
	released    bool
	relAnswered bool
	// held: the Lock was granted (the actor's, for obs).
	held bool
	// wslot is the slot of the Lock in its Client's context watchers
	// (ctxwatch.go) plus one, 0 when not watched; written under
	// c.watches.mu and mu, read under either.
	wslot int32
	// x is what only some Locks need, made when first needed: a Lock held
	// quietly has none (a client may hold a hundred thousand; see
	// docs/architecture.md, "Memory per hold").
	x *lockExtra
}

// lockExtra is the part of a Lock made when first needed: its end's cause
// (but ErrReleased), the answer to its Release (but nil), a composite's
// context watcher (a Client's Locks share theirs, ctxwatch.go), a LockAll's
// tokens, and an owner field the Client cannot build again from the
// request's ID (ownerField).
type lockExtra struct {
	err    error
	relErr error
	stop   func() bool // stops a composite's context watcher
	tokens *[]uint64   // a LockAll's, set before Acquired closes
	field  string
}

// extra returns l.x, made if need be. l.mu is held.
func (l *Lock) extra() *lockExtra {
	if l.x == nil {
		l.x = new(lockExtra)
	}
	return l.x
}

func newLock() *Lock {
	return &Lock{Acquired: make(chan struct{}), Lost: make(chan struct{})}
}

// endedLock returns a Lock of name that is over with err before it
// started: bad input, or a closed Client.
func endedLock(name string, err error) *Lock {
	l := newLock()
	l.ref.To = unstarted(name)
	l.end(err)
	return l
}

// unstarted is the Sender of a Lock that never reached an engine: it
// addresses nothing and keeps the Lock's name. Only such Locks pay for it
// (16 bytes, beside the lockExtra their error makes).
type unstarted string

func (unstarted) Send(lockactor.ReqID, lockactor.MsgKind, error) {}

// Name implements lockactor.Namer.
func (u unstarted) Name() string { return string(u) }

// acquired and lost are the Lock's channels as their closer sees them: the
// exported fields, receive-only, are the only copies (a second pair of
// fields would cost every Lock 16 bytes). A directional channel type has
// the bidirectional one's representation, so the conversion is sound.
func (l *Lock) acquired() chan struct{} {
	return *(*chan struct{})(unsafe.Pointer(&l.Acquired))
}

func (l *Lock) lost() chan struct{} {
	return *(*chan struct{})(unsafe.Pointer(&l.Lost))
}

// errNoLock is the answer of a Lock not made by Client.Lock.
var errNoLock = fmt.Errorf("%w: Lock not made by Client.Lock", ErrInvalidOption)

// usable reports whether l was made by newLock.
func (l *Lock) usable() bool { return l != nil && l.Lost != nil }

// errNilContext answers a blocking call given a nil context.
var errNilContext = fmt.Errorf("%w: nil context", ErrInvalidOption)

// Name returns the lock name.
func (l *Lock) Name() string {
	if l == nil {
		return ""
	}
	if n, ok := l.ref.To.(lockactor.Namer); ok {
		return n.Name()
	}
	return ""
}

// Err returns nil while the Lock is pending or held, and the cause once Lost
// is closed.
func (l *Lock) Err() error {
	if !l.usable() {
		return errNoLock
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.released:
		return ErrReleased
	case l.x == nil:
		return nil
	}
	return l.x.err
}

// Token returns the fencing token of this hold, valid once Acquired is
// closed: it increases with every grant of the lock, and nested Locks of one
// owner share their outer hold's token. Give it to the resource you protect
// and have it reject tokens lower than the highest it has seen.
func (l *Lock) Token() uint64 {
	if l == nil {
		return 0
	}
	return l.token.Load()
}

// Tokens returns the fencing tokens of this hold, valid once Acquired is
// closed: for a LockAll, one per target in the order given; for every other
// Lock, {Token()}.
func (l *Lock) Tokens() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.x != nil && l.x.tokens != nil {
		return append([]uint64(nil), (*l.x.tokens)...)
	}
	return []uint64{l.Token()}
}

// Deadline returns the current conservative validity deadline of the hold,
// in the Client's clock: the lease counted from before the request that set
// it was sent, less the drift allowance. The watchdog moves it forward. Zero
// before Acquired.
func (l *Lock) Deadline() time.Time {
	if l == nil {
		return time.Time{}
	}
	ns := l.deadline.Load()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// Wait blocks until the lock is held (nil), the Lock is over (Err()), or ctx
// ends (ctx.Err(); the Lock goes on). A nil ctx is ErrInvalidOption.
func (l *Lock) Wait(ctx context.Context) error {
	switch {
	case !l.usable():
		return errNoLock
	case ctx == nil:
		return errNilContext
	}
	if d, ok := l.ref.To.(lockactor.Driver); ok {
		d.Drive(ctx, l.Acquired, l.Lost)
	}
	select {
	case <-l.Acquired:
	case <-l.Lost:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-l.Lost:
		return l.Err()
	default:
		return nil
	}
}

// Release ends the hold, or cancels a pending Lock, and blocks until Redis
// confirmed it (nil), at most about CallTimeout when it cannot
// (ErrReleaseUnconfirmed), or until ctx ended (ctx.Err(); the release goes on
// in the background). It is safe to call twice: a Release after the Lock is
// over returns ErrNotHeld (wrapping the cause it ended with) and changes
// nothing. A hold that Redis no longer shows returns ErrNotOwner. A nil ctx
// is ErrInvalidOption, and releases nothing.
//
// ErrReleaseUnconfirmed means the node is down or was silent for a call's
// timeout: the Lock is over all the same (Lost is closed), its key runs out
// by its lease, and the release is repeated in the background meanwhile.
//
// For a LockAll or RedLock, Release waits for the nodes that answer and at
// most CallTimeout, never a lease: a node that is down or silent is released
// in the background (its key runs out meanwhile). LockAll's Release then
// returns ErrReleaseUnconfirmed naming each part that did not confirm;
// RedLock's returns nil while a majority of its nodes confirmed or never
// held the lock (another holder needs only a majority), and
// ErrReleaseUnconfirmed naming the nodes otherwise.
func (l *Lock) Release(ctx context.Context) error {
	switch {
	case !l.usable():
		return errNoLock
	case ctx == nil:
		return errNilContext
	}
	select {
	case <-l.Lost:
		return l.notHeld()
	default:
	}
	l.ref.Send(lockactor.MsgRelease, nil)
	if d, ok := l.ref.To.(lockactor.Driver); ok {
		d.Drive(ctx, l.Lost)
	}
	select {
	case <-l.Lost:
	case <-ctx.Done():
		return ctx.Err()
	}
	// A Release always ends the Lock; the actor answers it before it closes
	// Lost. No answer means the Lock ended before the Release was seen.
	var (
		answered bool
		err      error
	)
	l.mu.Lock()
	answered = l.relAnswered
	if l.x != nil {
		err = l.x.relErr
	}
	l.mu.Unlock()
	if !answered {
		return l.notHeld()
	}
	return err
}

func (l *Lock) notHeld() error {
	if err := l.Err(); err != nil && !errors.Is(err, ErrNotHeld) {
		return fmt.Errorf("%w: %w", ErrNotHeld, err)
	}
	return ErrNotHeld
}

// end closes Lost with err; called once, by the actor (or by Lock for a
// Lock that never started).
func (l *Lock) end(err error) {
	l.mu.Lock()
	l.over = true
	var stop func() bool
	if l.x != nil {
		stop, l.x.stop = l.x.stop, nil
	}
	watched := l.wslot != 0
	if err == ErrReleased {
		l.released = true
	} else {
		l.extra().err = err
	}
	l.mu.Unlock()
	if stop != nil {
		stop()
	}
	if watched {
		l.c.watches.leave(l)
	}
	close(l.lost())
}

// setStop keeps the context watcher's stop for end, or calls it if l is
// already over.
func (l *Lock) setStop(stop func() bool) {
	l.mu.Lock()
	if l.over {
		l.mu.Unlock()
		stop()
		return
	}
	l.extra().stop = stop
	l.mu.Unlock()
}
