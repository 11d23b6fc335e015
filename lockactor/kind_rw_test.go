package lockactor

import (
	"errors"
	"testing"
	"time"
)

// The read-write lock's local queue prefers writers (ReadWrite.Ahead): a
// writer never stands behind a reader of its client that waits: a reader
// held back by another client's waiting writer would keep its client's
// writer from ever trying.

// rwDriver enqueues read-write requests of owner fields c:i:OWNER.
type rwDriver struct{ *driver }

func (d rwDriver) ask(id ReqID, owner string, mode uint8) []Effect {
	field := "c:i:" + owner + ":r"
	if mode == ModeWrite {
		field = "c:i:" + owner + ":w"
	}
	return d.step(Msg{Kind: MsgEnqueue, Req: Request{ID: id, Field: field, Lease: lease, Watchdog: true, Wait: -1, Kind: ReadWrite, Mode: mode}})
}

// rwCall returns the one acquire call of effs, and the field it is for.
func rwCall(t *testing.T, effs []Effect) (op uint64, field string) {
	t.Helper()
	var calls []Effect
	for _, e := range effs {
		if e.Kind == EffCall {
			calls = append(calls, e)
		}
	}
	if len(calls) != 1 {
		t.Fatalf("want one call, got %d in %v", len(calls), kinds(effs))
	}
	return calls[0].Op, calls[0].Call.Args[0]
}

func noCall(t *testing.T, effs []Effect) {
	t.Helper()
	for _, e := range effs {
		if e.Kind == EffCall {
			t.Fatalf("want no call, got %s %v", e.Call.Script.Name, e.Call.Args)
		}
	}
}

// A reader that Redis holds back (another client's writer waits: a claim)
// sleeps at the head of the queue; a writer that arrives behind it tries at
// once, and the reader waits behind the writer's hold.
func TestRWWriterPassesHeldBackReader(t *testing.T) {
	d := rwDriver{newDriver(t)}
	op, field := rwCall(t, d.ask(1, "r", ModeRead))
	if field != "c:i:r:r" {
		t.Fatalf("first attempt for %s", field)
	}
	d.step(held(op, 5*time.Second)) // behind another client's claim
	d.now = d.now.Add(50 * time.Millisecond)
	op, field = rwCall(t, d.ask(2, "w", ModeWrite))
	if field != "c:i:w:w" {
		t.Fatalf("the writer's arrival tried %s, want the writer", field)
	}
	effs := d.step(granted(op, 1, 7))
	if a := one(t, effs, EffAcquired); a.ID != 2 {
		t.Fatalf("acquired %d, want the writer", a.ID)
	}
	noCall(t, effs) // the reader waits for the writer of its client
}

// A reader whose try is in flight when a writer arrives keeps its try (it
// may be granted); once Redis holds it back, the writer tries next, at once.
func TestRWWriterPassesReaderAfterItsTry(t *testing.T) {
	d := rwDriver{newDriver(t)}
	op, _ := rwCall(t, d.ask(1, "r", ModeRead))
	noCall(t, d.ask(2, "w", ModeWrite))
	_, field := rwCall(t, d.step(held(op, 5*time.Second)))
	if field != "c:i:w:w" {
		t.Fatalf("after the reader was held back: %s tried, want the writer", field)
	}
}

// A reader whose try got no answer may hold in Redis: it tries again before
// the writer passes it, and is passed only once Redis says it waits.
func TestRWWriterWaitsForUnansweredReader(t *testing.T) {
	d := rwDriver{newDriver(t)}
	op, _ := rwCall(t, d.ask(1, "r", ModeRead))
	d.step(Msg{Kind: MsgReply, Op: op, Fault: Ambiguous, Err: errors.New("timeout")})
	noCall(t, d.ask(2, "w", ModeWrite))
	d.now = d.now.Add(time.Second)
	op, field := rwCall(t, d.step(Msg{Kind: MsgTimer, Timer: TimerKey{Kind: TimerRetry}}))
	if field != "c:i:r:r" {
		t.Fatalf("retry for %s, want the unanswered reader", field)
	}
	if _, field = rwCall(t, d.step(held(op, 5*time.Second))); field != "c:i:w:w" {
		t.Fatalf("after the reader was held back: %s tried, want the writer", field)
	}
}

// A read request of an owner holding the write lock is granted whatever
// waits: no writer passes it. A write grant being given back (a writer that
// gave up) holds nothing for its owner: the owner's reader is passed.
func TestRWWriterPassesNoReaderOfTheWriteHolder(t *testing.T) {
	d := rwDriver{newDriver(t)}
	op, _ := rwCall(t, d.ask(1, "x", ModeWrite))
	one(t, d.step(granted(op, 1, 3)), EffAcquired)
	other, _ := rwCall(t, d.ask(2, "y", ModeWrite)) // refused by x's hold
	d.step(held(other, lease))
	if _, field := rwCall(t, d.ask(3, "x", ModeRead)); field != "c:i:x:r" {
		t.Fatalf("write → read tried %s, want x's reader", field)
	}

	d = rwDriver{newDriver(t)}
	op, _ = rwCall(t, d.ask(1, "x", ModeWrite))
	d.step(Msg{Kind: MsgCancel, ID: 1, Err: errors.New("gave up")})
	noCall(t, d.ask(2, "x", ModeRead))
	noCall(t, d.ask(3, "y", ModeWrite))
	effs := d.step(granted(op, 1, 3)) // granted to the writer that gave up: undone
	var tried []string
	for _, e := range effs {
		if e.Kind == EffCall {
			tried = append(tried, e.Call.Args[0])
		}
	}
	if len(tried) != 2 || tried[0] != "c:i:x:w" || tried[1] != "c:i:y:w" {
		t.Fatalf("calls %v, want the undo of x's write, then y's writer ahead of x's reader", tried)
	}
}
