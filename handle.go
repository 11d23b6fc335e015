package holdfast

import (
	"errors"
	"fmt"
	"time"

	"github.com/holdfast/holdfast/lockactor"
)

// handle is the actor's side of a Lock: it implements lockactor.Handle.
type handle struct{ l *Lock }

// Bind implements lockactor.Binder: the engine's Enqueue calls it before
// the request can reach its machine, on the caller's goroutine.
func (h handle) Bind(r lockactor.Ref) { h.l.ref = r }

func (h handle) Acquired(token uint64, deadline time.Time) {
	h.l.c.obs.Granted(h.l.times, h.l.Name(), h, token)
	h.l.held = true
	h.l.token.Store(token)
	h.l.deadline.Store(deadline.UnixNano())
	close(h.l.acquired())
}

func (h handle) SetDeadline(d time.Time) { h.l.deadline.Store(d.UnixNano()) }

func (h handle) ReleaseDone(err error) {
	if errors.Is(err, lockactor.ErrReleaseUnconfirmed) {
		// No release call succeeded within the call timeout: the node is
		// down, or silent. Renewal has stopped, so the key
		// runs out by its lease, and the actor repeats the release in the
		// background. Waiting for that could take a lease; the hold ends
		// here instead, on this side, and Release answers now.
		h.l.answerRelease(err)
		h.end(fmt.Errorf("%w: %w", ErrReleased, err))
		return
	}
	h.l.answerRelease(err)
}

// answerRelease keeps err as the answer to Release: the first answer, as
// Release returns once it has one.
func (l *Lock) answerRelease(err error) {
	l.mu.Lock()
	if !l.relAnswered {
		l.relAnswered = true
		if err != nil {
			l.extra().relErr = err
		}
	}
	l.mu.Unlock()
}

// Lost implements lockactor.Handle. A Lock whose release was not confirmed
// ended already (ReleaseDone): the actor's end then only settles that
// release in the background, and tells nobody.
func (h handle) Lost(err error) {
	h.l.mu.Lock()
	over := h.l.over
	h.l.mu.Unlock()
	if over {
		return
	}
	h.end(err)
}

// end notes the end of the Lock with err and closes Lost.
func (h handle) end(err error) {
	h.l.c.obs.Ended(h.l.times, h.l.Name(), h, h.l.token.Load(), h.l.held, err)
	h.l.end(err)
}

// RequestID is the Lock's request (lockactor.Giver): its Ref's ID, which
// Bind set before the actor could ask.
func (h handle) RequestID() lockactor.ReqID { return h.l.ref.ID }

// OwnerField is the Lock's owner field, for the Observer's log lines and a
// sleeping record (lockactor.Giver): the one the Lock keeps, or the
// Client's anonymous field of its request ID.
func (h handle) OwnerField() string {
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	if h.l.x != nil && h.l.x.field != "" {
		return h.l.x.field
	}
	return h.l.c.anonymousField(uint64(h.l.ref.ID))
}
