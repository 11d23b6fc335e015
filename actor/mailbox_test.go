package actor

import (
	"sync"
	"testing"
)

// invokerLog records the user messages a mailbox hands its actor.
type invokerLog struct {
	mu   sync.Mutex
	msgs []any
}

func (r *invokerLog) InvokeSystemMessage(any) {}
func (r *invokerLog) InvokeUserMessage(m any) {
	r.mu.Lock()
	r.msgs = append(r.msgs, m)
	r.mu.Unlock()
}
func (r *invokerLog) EscalateFailure(reason, _ any) { panic(reason) }
func (r *invokerLog) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

// queuedTurns is a Dispatcher that keeps the turns it is given for the
// test to run.
type queuedTurns struct{ turns []func() }

func (d *queuedTurns) Schedule(fn func()) { d.turns = append(d.turns, fn) }
func (d *queuedTurns) Throughput() int    { return 300 }

// A letter marked now runs the idle actor's turn on the sender's goroutine;
// other messages, and a now letter to a busy actor, wait for a runner; the
// sender handles at most inlineBudget messages and hands the rest over.
func TestMailboxRunsAnIdleActorOnTheSender(t *testing.T) {
	var inv invokerLog
	var d queuedTurns
	m := newMailbox().(*mailbox)
	m.RegisterHandlers(&inv, &d)

	m.PostUserMessage(&letter{now: true})
	if inv.count() != 1 || len(d.turns) != 0 {
		t.Fatalf("now letter to an idle actor: %d handled inline, %d turns scheduled; want 1, 0", inv.count(), len(d.turns))
	}

	m.PostUserMessage(&letter{}) // not now: a runner's turn
	if inv.count() != 1 || len(d.turns) != 1 {
		t.Fatalf("plain letter: %d handled, %d turns scheduled; want 1, 1", inv.count(), len(d.turns))
	}
	// The actor is now running (its turn is scheduled): a now letter waits
	// for that turn rather than running beside it.
	for range inlineBudget + 5 {
		m.PostUserMessage(&letter{now: true})
	}
	if inv.count() != 1 || len(d.turns) != 1 {
		t.Fatalf("now letters to a busy actor: %d handled, %d turns; want 1, 1", inv.count(), len(d.turns))
	}
	d.turns[0]()
	d.turns = nil
	if inv.count() != inlineBudget+7 {
		t.Fatalf("the runner's turn handled %d in all, want %d", inv.count(), inlineBudget+7)
	}

	// A backlog: the sender's turn stops after inlineBudget messages and a
	// runner takes the rest.
	m.running.Store(true)
	for range 2 * inlineBudget {
		m.PostUserMessage(&letter{})
	}
	d.turns = nil
	m.running.Store(false)
	before := inv.count()
	m.PostUserMessage(&letter{now: true})
	if got := inv.count() - before; got != inlineBudget || len(d.turns) != 1 {
		t.Fatalf("backlog: the sender handled %d (want %d), %d turns scheduled (want 1)", got, inlineBudget, len(d.turns))
	}
	d.turns[0]()
	if got := inv.count() - before; got != 2*inlineBudget+1 {
		t.Fatalf("backlog: %d handled in all, want %d", got, 2*inlineBudget+1)
	}
	if m.running.Load() {
		t.Fatal("mailbox left running with nothing to do")
	}
}
