package holdfast

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/holdfast/holdfast/lockactor"
)

// ctxWatches watches the contexts of a Client's Locks. Locks made with the
// same context share one watcher (context.AfterFunc): a program that locks
// in a loop under one long-lived context pays for a watcher once, not at
// every Lock. The watcher of a context that no Lock uses any more is kept
// for the next Lock made with it, up to maxIdleWatches of them; an older
// one is stopped, and so is every one at Close.
//
// Watchers are told apart by their context's Done channel: contexts
// derived from another one without a cancellation of their own (WithValue,
// WithOwner) share its channel, its end and its Err, and so its watcher.
type ctxWatches struct {
	mu     sync.Mutex
	byDone map[<-chan struct{}]*ctxWatch
	// idle holds the watchers that no Lock uses, oldest first.
	idle []*ctxWatch
	// slots says where each watched Lock is: Lock.wslot is its index here
	// plus one (the Lock keeps no pointer of its own for it: it stays in
	// its size class). free lists the unused slots.
	slots  []watchSlot
	free   []int32
	closed bool
}

// watchSlot is one watched Lock's place: its watcher and its index in the
// watcher's locks.
type watchSlot struct {
	w   *ctxWatch
	pos int
}

// ctxWatch is the watcher of one context and the Locks it ends. Its fire
// method is the context's AfterFunc (a closure of one pointer).
type ctxWatch struct {
	ws    *ctxWatches
	ctx   context.Context // its Done is the key in byDone
	stop  func() bool
	locks []*Lock
	idle  bool // in ctxWatches.idle
	gone  bool // out of byDone: fired, or stopped
}

// maxIdleWatches bounds the watchers kept while no Lock uses them. Each
// keeps its context reachable until the context ends or the watcher is
// stopped.
const maxIdleWatches = 16

// add makes the end of ctx cancel l, a Lock that reached its engine. It
// does nothing if l is over already.
func (ws *ctxWatches) add(ctx context.Context, l *Lock) {
	done := ctx.Done()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.closed {
		return // the Client's Close ends l
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.over {
		return
	}
	w := ws.byDone[done]
	switch {
	case w == nil:
		if ws.byDone == nil {
			ws.byDone = make(map[<-chan struct{}]*ctxWatch)
		}
		w = &ctxWatch{ws: ws, ctx: ctx}
		ws.byDone[done] = w
		// A context that has ended already runs fire on its own goroutine,
		// which waits for mu.
		w.stop = context.AfterFunc(ctx, w.fire)
	case w.idle:
		ws.unidle(w)
	}
	var slot int32
	if n := len(ws.free); n > 0 {
		slot, ws.free = ws.free[n-1], ws.free[:n-1]
	} else {
		slot = int32(len(ws.slots))
		ws.slots = append(ws.slots, watchSlot{})
	}
	ws.slots[slot] = watchSlot{w: w, pos: len(w.locks)}
	w.locks = append(w.locks, l)
	l.wslot = slot + 1
}

// release frees the slot of l, whose watching is over. ws.mu is held.
func (ws *ctxWatches) release(l *Lock) {
	l.mu.Lock()
	slot := l.wslot - 1
	l.wslot = 0
	l.mu.Unlock()
	ws.slots[slot] = watchSlot{}
	ws.free = append(ws.free, slot)
}

// fire cancels the Locks of w, whose context ended.
func (w *ctxWatch) fire() {
	ws := w.ws
	ws.mu.Lock()
	if ws.closed {
		ws.mu.Unlock()
		return // the Client's Close ended the Locks
	}
	ws.drop(w)
	locks := w.locks
	w.locks = nil
	for _, l := range locks {
		ws.release(l)
	}
	ws.mu.Unlock()
	if len(locks) == 0 {
		return // an idle watcher's context
	}
	err := fmt.Errorf("holdfast: lock context ended: %w", w.ctx.Err())
	for _, l := range locks {
		l.ref.Send(lockactor.MsgCancel, err)
	}
}

// leave is the end of l's watching: l is over (Lock.end). A watcher left
// without Locks becomes idle; the oldest idle one beyond maxIdleWatches is
// stopped.
func (ws *ctxWatches) leave(l *Lock) {
	var stop func() bool
	ws.mu.Lock()
	l.mu.Lock()
	slot := l.wslot - 1
	l.mu.Unlock()
	if slot >= 0 && !ws.closed {
		s := ws.slots[slot]
		w := s.w
		last := len(w.locks) - 1
		moved := w.locks[last]
		w.locks[s.pos] = moved
		ws.slots[moved.wslot-1].pos = s.pos // moved is l when l is last
		w.locks[last] = nil
		w.locks = w.locks[:last]
		ws.release(l)
		if last == 0 && !w.gone {
			w.idle = true
			ws.idle = append(ws.idle, w)
			if len(ws.idle) > maxIdleWatches {
				old := ws.idle[0]
				ws.drop(old)
				stop = old.stop
			}
		}
	}
	ws.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// drop takes w out of byDone and of the idle list. ws.mu is held.
func (ws *ctxWatches) drop(w *ctxWatch) {
	if w.idle {
		ws.unidle(w)
	}
	if !w.gone {
		w.gone = true
		delete(ws.byDone, w.ctx.Done()) // the same channel at every call
	}
}

// unidle takes w out of the idle list. ws.mu is held.
func (ws *ctxWatches) unidle(w *ctxWatch) {
	w.idle = false
	if i := slices.Index(ws.idle, w); i >= 0 {
		ws.idle = slices.Delete(ws.idle, i, i+1)
	}
}

// close stops every idle watcher, once the Client's Locks are over.
func (ws *ctxWatches) close() {
	ws.mu.Lock()
	ws.closed = true
	var stops []func() bool
	for _, w := range ws.byDone {
		stops = append(stops, w.stop)
		w.gone, w.idle = true, false
	}
	ws.byDone, ws.idle, ws.slots, ws.free = nil, nil, nil, nil
	ws.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}
