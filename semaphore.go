package holdfast

import (
	"context"
	"fmt"

	"github.com/holdfast/holdfast/lockactor"
)

// Semaphore takes one of permits permits of name: at most permits holds of
// name at once, across every process. It returns at once, like Lock, with
// the same *Lock handle and options.
//
// Each permit is a hold like any other: its own lease (the watchdog renews
// it while its holder lives, or WithLease fixes it), a fencing token from
// the name's counter, Lost closing before Redis could give the permit to
// anyone else, and reentry for the same owner (WithOwner), which keeps its
// one permit. A dead holder's permit frees at the end of its own lease,
// whatever the other holders renew. Waiters keep nothing in Redis: they
// sleep until a release is announced or, at the latest, until the earliest
// permit's lease could end.
//
// Every caller of a name passes the same permits: a call with another count
// while the name is held ends with ErrPermits and changes nothing. permits
// below 1 ends the Lock with ErrInvalidOption; a name in use as another kind
// of lock ends it with ErrWrongKind.
//
// Under LayoutRedisson the semaphore is Redisson's
// RPermitExpirableSemaphore of the name, shared with Java processes: a
// permit is a lease record beside Redisson's count of free permits, and
// releases of either side wake waiters of both. Its size is the one Redis
// keeps (Java's trySetPermits, or the first Semaphore call on a name with
// no keys, which sets it up the same way); another count ends with
// ErrPermits even while no permit is held. Redisson keeps no fencing
// counter for the kind, so Token is 0: a Java holder takes no token, and
// one counted for the Go holders alone would fence them against each other
// but not against Java's writes.
func (c *Client) Semaphore(ctx context.Context, name string, permits int, opts ...Option) *Lock {
	if permits < 1 {
		return endedLock(name, fmt.Errorf("%w: Semaphore permits %d, want at least 1", ErrInvalidOption, permits))
	}
	return c.request(ctx, name, lockactor.Semaphore(permits), 0, opts)
}
