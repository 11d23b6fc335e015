// Package clientkit is the seam between package holdfast and the runtimes a
// Client can run on: the protoactor runtime of production (package actor)
// and the deterministic scheduler of the simulator (package sim). It lets sim
// build a *holdfast.Client — the same public API — over its own runtime
// without widening holdfast's public surface.
package clientkit

import (
	"context"

	"github.com/holdfast/holdfast/lockactor"
)

// Engine runs the lock machines of one Client.
type Engine interface {
	// Enqueue starts request req on the machine of name; h hears back.
	// It gives h the Ref it returns (lockactor.Bind) before the request
	// can reach the machine, and its Ref's Sender is a lockactor.Namer.
	Enqueue(name string, req lockactor.Request, h lockactor.Handle) (lockactor.Ref, error)
	// Close ends every request with lockactor.ErrClosed, releasing holds,
	// and waits for the machines to finish.
	Close(ctx context.Context) error
	// Actors reports the machines alive.
	Actors() int
}

// NewClient is installed by package holdfast: it returns a *holdfast.Client
// (as any) for cfg (a holdfast.Config, whose Redis may be nil) running on e.
// closers run after e.Close, in order, when the Client closes.
var NewClient func(cfg any, e Engine, closers ...func()) (any, error)
