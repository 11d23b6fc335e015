package actor

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	protoactor "github.com/asynkron/protoactor-go/actor"
	cmap "github.com/orcaman/concurrent-map"
)

// shared is the protoactor system of the process, shared by every System
// (every Client): one cost about 2.9 MB of heap as protoactor makes it (its
// process registry is 1,024 concurrent maps; shrinkRegistry keeps 16), far
// more than the rest of a Client. The first
// System to start makes it and the last to close shuts it down, so that a
// process with no Client holds none. protoactor names the actors it spawns
// from one counter per system ("$1", "$2", ...), so the actors of different
// Systems never share a name.
var shared struct {
	mu    sync.Mutex // guards the fields below
	as    *protoactor.ActorSystem
	users int
	// loggers are the Loggers of the Systems using as; protoactor's own
	// records (supervision, dead letters) go to each of them. It is read
	// without mu (protoactor logs while joinShared holds it), and a
	// published slice is never written in place.
	loggers atomic.Pointer[[]*slog.Logger]
}

// deadLetters counts the letters protoactor could not deliver in this
// process (DeadLetters).
var deadLetters atomic.Int64

// DeadLetters reports how many letters the process's lock actors were sent
// after they had stopped. The runtime never sends one (an actor stops only
// when nothing is on its way to it), so any is a bug; protoactor logs each.
func DeadLetters() int64 { return deadLetters.Load() }

// joinShared returns the process's protoactor system, making it if no
// System uses one, and adds logger to those its records go to. Each call
// is paired with a leaveShared of the same logger.
func joinShared(logger *slog.Logger) *protoactor.ActorSystem {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	ls := append(slices.Clip(sharedLoggers()), logger)
	shared.loggers.Store(&ls)
	shared.users++
	if shared.as == nil {
		shared.as = protoactor.NewActorSystem(protoactor.WithLoggerFactory(func(*protoactor.ActorSystem) *slog.Logger {
			return slog.New(fanOut{})
		}))
		shrinkRegistry(shared.as.ProcessRegistry)
		// Unsubscribed by Shutdown, with the rest of the system's stream.
		shared.as.EventStream.Subscribe(func(msg any) {
			if _, ok := msg.(*protoactor.DeadLetterEvent); ok {
				deadLetters.Add(1)
			}
		})
	}
	return shared.as
}

// leaveShared undoes joinShared; the last System to leave shuts the
// protoactor system down.
func leaveShared(logger *slog.Logger) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if ls := sharedLoggers(); slices.Contains(ls, logger) {
		i := slices.Index(ls, logger)
		ls = slices.Delete(slices.Clone(ls), i, i+1)
		shared.loggers.Store(&ls)
	}
	shared.users--
	if shared.users == 0 {
		shared.as.Shutdown()
		shared.as = nil
	}
}

// sharedLoggers returns the loggers of the Systems using the shared
// protoactor system. The caller must not write to the slice.
func sharedLoggers() []*slog.Logger {
	if p := shared.loggers.Load(); p != nil {
		return *p
	}
	return nil
}

// fanOut is the slog handler of the shared protoactor system: it hands each
// record to the Logger of every System using the system, tagged
// lib=protoactor, as each System's own protoactor did before the system was
// shared. With one Client per process (the usual case) nothing changes;
// with several, an actor's supervision record reaches every Client's log.
type fanOut struct {
	// with are the WithAttrs and WithGroup calls made on the handler, in
	// order, replayed on each System's handler.
	with []func(slog.Handler) slog.Handler
}

func (h fanOut) Enabled(ctx context.Context, l slog.Level) bool {
	for _, lg := range sharedLoggers() {
		if lg.Enabled(ctx, l) {
			return true
		}
	}
	return false
}

func (h fanOut) Handle(ctx context.Context, r slog.Record) error {
	var errs []error
	for _, lg := range sharedLoggers() {
		hd := lg.Handler().WithAttrs([]slog.Attr{slog.String("lib", "protoactor")})
		for _, w := range h.with {
			hd = w(hd)
		}
		if hd.Enabled(ctx, r.Level) {
			errs = append(errs, hd.Handle(ctx, r.Clone()))
		}
	}
	return errors.Join(errs...)
}

func (h fanOut) WithAttrs(as []slog.Attr) slog.Handler {
	h.with = append(slices.Clip(h.with), func(hd slog.Handler) slog.Handler { return hd.WithAttrs(as) })
	return h
}

func (h fanOut) WithGroup(name string) slog.Handler {
	h.with = append(slices.Clip(h.with), func(hd slog.Handler) slog.Handler { return hd.WithGroup(name) })
	return h
}

// registryBuckets is the number of concurrent maps (of 32 shards each) in
// the shared system's process registry; protoactor makes 1,024.
const registryBuckets = 16

// shrinkRegistry replaces the 1,024 concurrent maps of a new protoactor
// system's process registry with registryBuckets of them, keeping what
// the system registered as it started. Every one of protoactor's 32,768
// shard maps that ever held an actor keeps a 288-byte group for good (Go
// maps do not shrink), and each actor's pid lands in a fresh shard: after
// a hundred thousand actors the registry held about 9.4 MB more than
// empty (some 90 bytes per quiet hold of 100,000), and 2.6 MB empty. With
// 512 shard maps it costs about what the most actors alive at once take
// (some 40 bytes each), and 512 locks still spread the spawns. The system
// is not in use yet: no pid has been looked up.
func shrinkRegistry(pr *protoactor.ProcessRegistryValue) {
	sm := &protoactor.SliceMap{LocalPIDs: make([]cmap.ConcurrentMap, registryBuckets)}
	for i := range sm.LocalPIDs {
		sm.LocalPIDs[i] = cmap.New()
	}
	for _, b := range pr.LocalPIDs.LocalPIDs {
		for id, p := range b.Items() {
			sm.GetBucket(id).Set(id, p)
		}
	}
	pr.LocalPIDs = sm
}
