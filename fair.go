package holdfast

import (
	"context"

	"github.com/holdfast/holdfast/lockactor"
)

// FairLock is Lock with first-come, first-served grants across every
// process: a FairLock is granted in the order the requests reached Redis,
// and a new one never overtakes a queued waiter, not even one of the
// releasing process (reentry by the holder, WithOwner, is the one
// exception). It returns the same *Lock as Lock, with the same options.
//
// Release grants the lock to the next waiter inside Redis and tells only
// that waiter's process, which confirms the grant with one call and dates
// its lease from it; no other waiter wakes. Each process keeps its waiters'
// places alive while it lives: a crashed process's waiters leave the queue
// within Config.WaiterTimeout, and a grant not confirmed within it passes
// on. Choose FairLock over Lock when waiters must not starve under
// contention; it costs one more round trip per handoff between processes
// (the confirmation) and loses Lock's local handoff within a process.
//
// A name used as FairLock refuses Lock (and the other way round) with
// ErrWrongKind while held or queued.
func (c *Client) FairLock(ctx context.Context, name string, opts ...Option) *Lock {
	return c.request(ctx, name, lockactor.Fair, 0, opts)
}
