package holdfast

import (
	"context"

	"github.com/holdfast/holdfast/lockactor"
)

// ReadLock asks for a read hold of name, shared with every other read hold
// of the name, in any process; it returns at once, like Lock, with the same
// *Lock handle and options. The returned Lock's Token is a fencing token
// from the name's counter, taken at this grant.
//
// Writers are preferred: once a WriteLock waits for the name, new readers
// queue behind it, and so do the readers of its own Client that wait (an
// owner that already holds the name, as a reader or as the writer, is still
// granted), so a steady stream of readers cannot keep a writer waiting
// longer than the readers that held when it arrived (see WriteLock). Each
// read hold has a lease of its own: a crashed reader's hold ends on its own
// deadline, whatever the live readers renew.
//
// A name in use as another kind of lock (Lock, FairLock) ends the Lock with
// ErrWrongKind.
func (c *Client) ReadLock(ctx context.Context, name string, opts ...Option) *Lock {
	return c.request(ctx, name, lockactor.ReadWrite, lockactor.ModeRead, opts)
}

// WriteLock asks for the write hold of name, which excludes every other hold
// of the name (read or write, of any owner and process); it returns at once,
// like Lock. While it waits, new readers queue behind it; if its process
// dies meanwhile, its claim on the next turn lapses after
// Config.WaiterTimeout.
//
// A writer waits only while holds stand in its way: the holds of the name
// when it asked (read or write, in any process), and those of the writers
// that take a turn before it — its Client's writers that asked before it,
// and other processes' writers, which race it for each turn (writers are
// not queued in order across processes). No reader that waits holds it
// back: other processes' readers that try once its claim is in Redis wait
// behind it, and its own Client's waiting readers wait behind it, whatever
// holds them back (only a reader whose try was already on its way when it
// asked may still be granted first). On a name that another process's
// writers keep busy, a writer therefore competes with them for each turn,
// as it does when it asks alone, and never waits behind a reader that
// their claims hold back.
//
// The owner of a write hold may also take ReadLock on the name (write →
// read): releasing the write hold then leaves it a reader. An owner that
// holds a ReadLock asking for WriteLock on the same name would wait for
// itself: the Lock ends at once with ErrWouldDeadlock.
func (c *Client) WriteLock(ctx context.Context, name string, opts ...Option) *Lock {
	return c.request(ctx, name, lockactor.ReadWrite, lockactor.ModeWrite, opts)
}
