package holdfast

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast/lockactor"
)

// cancels records the messages the watchers send to Locks.
type cancels struct {
	mu   sync.Mutex
	got  map[lockactor.ReqID][]error
	sent chan lockactor.ReqID
}

func newCancels() *cancels {
	return &cancels{got: map[lockactor.ReqID][]error{}, sent: make(chan lockactor.ReqID, 100)}
}

func (c *cancels) Send(id lockactor.ReqID, kind lockactor.MsgKind, err error) {
	if kind != lockactor.MsgCancel {
		panic(fmt.Sprintf("watcher sent message kind %v", kind))
	}
	c.mu.Lock()
	c.got[id] = append(c.got[id], err)
	c.mu.Unlock()
	c.sent <- id
}

// wait returns the IDs of the next n cancellations.
func (c *cancels) wait(t *testing.T, n int) map[lockactor.ReqID]bool {
	t.Helper()
	ids := map[lockactor.ReqID]bool{}
	for range n {
		select {
		case id := <-c.sent:
			ids[id] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d cancellations came", len(ids), n)
		}
	}
	return ids
}

// none checks that no cancellation comes within a short while (a watcher
// that fires does so on its own goroutine).
func (c *cancels) none(t *testing.T) {
	t.Helper()
	select {
	case id := <-c.sent:
		t.Fatalf("Lock %d was cancelled", id)
	case <-time.After(50 * time.Millisecond):
	}
}

func watchedLock(to lockactor.Sender, id lockactor.ReqID) *Lock {
	l := newLock()
	l.ref = lockactor.Ref{To: to, ID: id}
	return l
}

// end is Lock.end's part that concerns the watchers.
func endWatched(ws *ctxWatches, l *Lock) {
	l.mu.Lock()
	l.over = true
	watched := l.wslot != 0
	l.mu.Unlock()
	if watched {
		ws.leave(l)
	}
}

// of returns the watcher of l.
func (ws *ctxWatches) of(l *Lock) *ctxWatch {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if l.wslot == 0 {
		return nil
	}
	return ws.slots[l.wslot-1].w
}

func TestLocksOfOneContextShareItsWatcher(t *testing.T) {
	var ws ctxWatches
	rec := newCancels()
	ctx, cancel := context.WithCancel(context.Background())
	derived := WithOwner(ctx, "o") // same Done channel
	var locks []*Lock
	for i := range 5 {
		l := watchedLock(rec, lockactor.ReqID(i+1))
		c := ctx
		if i%2 == 1 {
			c = derived
		}
		ws.add(c, l)
		locks = append(locks, l)
	}
	if n := len(ws.byDone); n != 1 {
		t.Fatalf("%d watchers for one context, want 1", n)
	}
	for _, l := range locks[1:] {
		if ws.of(l) != ws.of(locks[0]) {
			t.Fatal("Locks of one context have different watchers")
		}
	}
	// One Lock ends before the context: it is not cancelled, the others are.
	endWatched(&ws, locks[2])
	cancel()
	ids := rec.wait(t, 4)
	if ids[3] {
		t.Fatal("the Lock that ended was cancelled")
	}
	rec.none(t)
	for id, errs := range rec.got {
		if len(errs) != 1 || !errors.Is(errs[0], context.Canceled) {
			t.Fatalf("Lock %d got %v, want one error wrapping context.Canceled", id, errs)
		}
	}
	if len(ws.byDone) != 0 || len(ws.idle) != 0 {
		t.Fatalf("a fired watcher is kept: %d watchers, %d idle", len(ws.byDone), len(ws.idle))
	}
	for _, l := range locks {
		if l.wslot != 0 {
			t.Fatal("a Lock still has a slot of the watcher that fired")
		}
	}
	if len(ws.free) != len(ws.slots) {
		t.Fatalf("%d of %d slots free, want all", len(ws.free), len(ws.slots))
	}
}

func TestIdleWatcherIsReusedAndBounded(t *testing.T) {
	var ws ctxWatches
	rec := newCancels()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := watchedLock(rec, 1)
	ws.add(ctx, l)
	first := ws.of(l)
	endWatched(&ws, l)
	if len(ws.idle) != 1 || !first.idle {
		t.Fatalf("the watcher of a context no Lock uses is not idle: %d idle", len(ws.idle))
	}
	l = watchedLock(rec, 2)
	ws.add(ctx, l)
	if ws.of(l) != first || first.idle || len(ws.idle) != 0 {
		t.Fatal("the next Lock of the context did not take its idle watcher")
	}
	endWatched(&ws, l)

	// More idle contexts than kept: the oldest ones' watchers stop.
	var others []context.CancelFunc
	for i := range maxIdleWatches + 3 {
		c, cancel := context.WithCancel(context.Background())
		others = append(others, cancel)
		l := watchedLock(rec, lockactor.ReqID(10+i))
		ws.add(c, l)
		endWatched(&ws, l)
	}
	if len(ws.idle) != maxIdleWatches || len(ws.byDone) != maxIdleWatches {
		t.Fatalf("%d idle watchers, %d in all, want %d", len(ws.idle), len(ws.byDone), maxIdleWatches)
	}
	if _, ok := ws.byDone[ctx.Done()]; ok {
		t.Fatal("the oldest idle watcher was kept")
	}
	// A Lock made with the evicted context is watched anew.
	l = watchedLock(rec, 3)
	ws.add(ctx, l)
	cancel()
	if ids := rec.wait(t, 1); !ids[3] {
		t.Fatalf("cancelled %v, want Lock 3", ids)
	}
	for _, c := range others {
		c()
	}
	rec.none(t) // the Locks of the idle watchers are over
}

func TestWatcherLeavesTheOthersWatched(t *testing.T) {
	var ws ctxWatches
	rec := newCancels()
	ctx, cancel := context.WithCancel(context.Background())
	var locks []*Lock
	for i := range 6 {
		l := watchedLock(rec, lockactor.ReqID(i+1))
		ws.add(ctx, l)
		locks = append(locks, l)
	}
	for _, i := range []int{0, 3, 5} { // first, middle, last
		endWatched(&ws, locks[i])
	}
	cancel()
	ids := rec.wait(t, 3)
	for _, id := range []lockactor.ReqID{2, 3, 5} {
		if !ids[id] {
			t.Fatalf("cancelled %v, want Locks 2, 3 and 5", ids)
		}
	}
	rec.none(t)
}

func TestWatcherSkipsAnEndedLockAndStopsAtClose(t *testing.T) {
	var ws ctxWatches
	rec := newCancels()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := watchedLock(rec, 1)
	endWatched(&ws, ended) // over before it is watched (a try-once that failed at once)
	ws.add(ctx, ended)
	if ended.wslot != 0 || len(ws.byDone) != 0 {
		t.Fatal("a Lock that is over was watched")
	}
	idle := watchedLock(rec, 2)
	ws.add(ctx, idle)
	endWatched(&ws, idle)
	live := watchedLock(rec, 3)
	c2, cancel2 := context.WithCancel(context.Background())
	ws.add(c2, live)
	ws.close()
	if len(ws.byDone) != 0 || len(ws.idle) != 0 {
		t.Fatal("watchers kept after close")
	}
	cancel()
	cancel2()
	rec.none(t)
	ws.add(ctx, watchedLock(rec, 4)) // the closed Client ends its Locks itself
	if len(ws.byDone) != 0 {
		t.Fatal("a watcher was made after close")
	}
	endWatched(&ws, live) // its watcher was stopped: nothing to do
}

// A context that ended before its Lock was watched cancels the Lock at
// once.
func TestWatcherOfAnEndedContextFires(t *testing.T) {
	var ws ctxWatches
	rec := newCancels()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ws.add(ctx, watchedLock(rec, 1))
	if ids := rec.wait(t, 1); !ids[1] {
		t.Fatalf("cancelled %v", ids)
	}
}
