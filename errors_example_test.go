package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/holdfasttest"
)

// A Lock's Err, and the errors of Wait and Release, wrap one of holdfast's
// errors or the context's: tell them apart with errors.Is. The errors that
// wrap another one (ErrNotHeld, ErrNoQuorum) come first, so that their own
// meaning wins.
func Example_errors() {
	explain := func(err error) string {
		switch {
		case err == nil:
			return "ok"
		case errors.Is(err, holdfast.ErrNotHeld):
			return "released twice: nothing done"
		case errors.Is(err, holdfast.ErrReleaseUnconfirmed):
			return "released here; Redis did not confirm: the key runs out with its lease"
		case errors.Is(err, holdfast.ErrNoQuorum):
			return "a RedLock without a majority"
		case errors.Is(err, holdfast.ErrReleased):
			return "over: released"
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return "over: the context ended"
		case errors.Is(err, holdfast.ErrWaitTimeout):
			return "not granted within WithWait: busy"
		case errors.Is(err, holdfast.ErrLeaseExpired):
			return "lost: the lease ran out before a renewal"
		case errors.Is(err, holdfast.ErrNotOwner):
			return "lost: Redis shows another holder, or none"
		case errors.Is(err, holdfast.ErrFailover):
			return "lost: a failover demoted the server"
		case errors.Is(err, holdfast.ErrReplicaSync):
			return "not granted: too few replicas acknowledged"
		case errors.Is(err, holdfast.ErrClosed):
			return "over: the Client was closed"
		case errors.Is(err, holdfast.ErrWrongKind):
			return "refused: the name is in use as another kind"
		case errors.Is(err, holdfast.ErrPermits):
			return "refused: another permit count for this semaphore"
		case errors.Is(err, holdfast.ErrWouldDeadlock):
			return "refused: WriteLock while holding the ReadLock"
		case errors.Is(err, holdfast.ErrNotSupported):
			return "refused: a kind the Client's layout cannot speak"
		case errors.Is(err, holdfast.ErrInvalidName), errors.Is(err, holdfast.ErrInvalidValue),
			errors.Is(err, holdfast.ErrInvalidOption):
			return "refused: bad input"
		case errors.Is(err, holdfast.ErrRedis):
			return "refused by Redis (ACL, script): retrying cannot help"
		default:
			return "a Redis call failed: " + err.Error()
		}
	}

	url, stop, err := holdfasttest.Embedded() // in a program: your Redis's URL
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	c, err := holdfast.Open(url, holdfast.Config{})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	l := c.Lock(ctx, "orders:42")
	fmt.Println("Wait:", explain(l.Wait(ctx)))
	fmt.Println("a second Lock:", explain(c.Lock(ctx, "orders:42", holdfast.WithWait(0)).Wait(ctx)))
	fmt.Println("a Semaphore:", explain(c.Semaphore(ctx, "orders:42", 2).Wait(ctx)))
	fmt.Println("an empty name:", explain(c.Lock(ctx, "").Wait(ctx)))
	fmt.Println("Release:", explain(l.Release(ctx)))
	fmt.Println("Err:", explain(l.Err()))
	fmt.Println("Release again:", explain(l.Release(ctx)))

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	fmt.Println("a cancelled context:", explain(c.Lock(cancelled, "orders:42").Wait(ctx)))

	if err := c.Close(); err != nil {
		fmt.Println("close:", err)
	}
	fmt.Println("after Close:", explain(c.Lock(ctx, "orders:42").Wait(ctx)))
	// Output:
	// Wait: ok
	// a second Lock: not granted within WithWait: busy
	// a Semaphore: refused: the name is in use as another kind
	// an empty name: refused: bad input
	// Release: ok
	// Err: over: released
	// Release again: released twice: nothing done
	// a cancelled context: over: the context ended
	// after Close: over: the Client was closed
}
