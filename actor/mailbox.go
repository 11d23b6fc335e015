package actor

import (
	"runtime"
	"sync"
	"sync/atomic"

	protoactor "github.com/asynkron/protoactor-go/actor"

	"github.com/holdfast/holdfast/lockactor"
)

// letter is every message the runtime sends a lock actor, sent by pointer
// and pooled: a value such as lockactor.Msg put in an interface is one
// allocation per message, and an uncontended cycle sends four.
type letter struct {
	tag    letterTag
	msg    lockactor.Msg    // tagMsg, tagEnqueue (msg.Req)
	handle lockactor.Handle // tagEnqueue
	timer  *machineTimer    // tagTimer
	seq    uint64           // tagTimer, tagIdle
	// vals holds msg.Reply when it fits, copied from a buffer its sender
	// reuses (CallResult.buf): a reply then costs no allocation.
	vals [replyInline]int64
	// now asks the mailbox to run the actor's turn on the sending
	// goroutine if the actor is idle (see mailbox.PostUserMessage).
	now bool
	// counted: the letter was sent through the actor's entry and counts in
	// its enqueues until received (System.deliver).
	counted bool
}

type letterTag uint8

const (
	tagMsg     letterTag = iota + 1 // a machine message: msg
	tagEnqueue                      // a new request: msg.Req and handle
	tagTimer                        // a machine timer fired: timer and seq
	tagIdle                         // the linger timer fired: seq
	tagCrash                        // panic (tests of supervision)
)

// replyInline is the longest script reply a letter (and a CallResult)
// holds without allocating: the kinds' replies have at most four integers.
const replyInline = 6

var letters = sync.Pool{New: func() any { return new(letter) }}

// newLetter returns a pooled letter; the actor that receives it frees it.
func newLetter(tag letterTag) *letter {
	l := letters.Get().(*letter)
	l.tag = tag
	return l
}

// free puts l back in the pool; nothing may use it afterwards.
func (l *letter) free() {
	*l = letter{}
	letters.Put(l)
}

// mailbox is the lock actors' protoactor Mailbox. Like protoactor's
// unbounded lock-free one it takes no memory up front and runs its actor's
// turns on the Dispatcher (the System's pool), system messages first; unlike
// it, posting a message allocates nothing: the queue's buffer is pooled
// rather than a node per message, and the turn function is bound once
// rather than at each scheduling.
type mailbox struct {
	invoker    protoactor.MessageInvoker
	dispatcher protoactor.Dispatcher
	process    func() // m.processMessages, bound once
	running    atomic.Bool
	// suspended is set while the actor's supervisor decides on a failure:
	// user messages wait, system messages do not.
	suspended atomic.Bool

	mu   sync.Mutex // guards the fields below
	sys  []any      // system messages, in order; nil when none
	user queue      // user messages, in order
}

func newMailbox() protoactor.Mailbox { return &mailbox{} }

// PostUserMessage implements protoactor.Mailbox. A letter marked now, sent
// by a caller of the API (Lock, Release) rather than by the runtime, runs
// the actor's turn on the caller's goroutine when the actor is idle: that
// saves the hop to a runner and back. The turn never blocks (script calls
// go to workers), and it handles at most inlineBudget messages before
// handing the rest to a runner, so the caller returns soon.
func (m *mailbox) PostUserMessage(msg any) {
	now := false
	if l, ok := msg.(*letter); ok {
		now = l.now // read before the push: the letter is the actor's after it
	}
	if now && m.running.CompareAndSwap(false, true) {
		// The actor is idle. With nothing queued before the letter, its
		// turn handles it straight away, without a trip through the queue
		// (a push and a pop, each under mu).
		m.mu.Lock()
		direct := len(m.sys) == 0 && m.user.len() == 0 && !m.suspended.Load()
		if !direct {
			m.user.push(msg)
		}
		m.mu.Unlock()
		m.runInline(msg, direct)
		return
	}
	m.mu.Lock()
	m.user.push(msg)
	m.mu.Unlock()
	if !now {
		m.schedule()
		return
	}
	if !m.running.CompareAndSwap(false, true) {
		return // running: the turn under way takes the letter
	}
	m.runInline(nil, false)
}

// runInline is PostUserMessage's turn on the caller's goroutine, which has
// marked the mailbox running: msg first if direct (nothing was queued
// before it), then the queue, up to inlineBudget messages in all.
func (m *mailbox) runInline(msg any, direct bool) {
	budget := inlineBudget
	if direct {
		m.invoke(msg)
		budget--
		// As at the end of processMessages: a letter posted during the
		// turn saw the mailbox running and left its handling to us.
		m.running.Store(false)
		if !m.more() || !m.running.CompareAndSwap(false, true) {
			return
		}
	}
	if m.run(budget) {
		m.dispatcher.Schedule(m.process) // still running: a runner goes on
		return
	}
	m.running.Store(false)
	if m.more() {
		m.schedule()
	}
}

// invoke handles the user message msg; a panic goes to the supervisor, as
// in run.
func (m *mailbox) invoke(msg any) {
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	m.invoker.InvokeUserMessage(msg)
}

// inlineBudget bounds the messages a caller's goroutine handles in one
// PostUserMessage.
const inlineBudget = 8

// PostSystemMessage implements protoactor.Mailbox.
func (m *mailbox) PostSystemMessage(msg any) {
	m.mu.Lock()
	m.sys = append(m.sys, msg)
	m.mu.Unlock()
	m.schedule()
}

// RegisterHandlers implements protoactor.Mailbox.
func (m *mailbox) RegisterHandlers(invoker protoactor.MessageInvoker, dispatcher protoactor.Dispatcher) {
	m.invoker, m.dispatcher = invoker, dispatcher
	m.process = m.processMessages
}

// Start implements protoactor.Mailbox.
func (m *mailbox) Start() {}

// UserMessageCount implements protoactor.Mailbox.
func (m *mailbox) UserMessageCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.user.len()
}

func (m *mailbox) schedule() {
	if m.running.CompareAndSwap(false, true) {
		m.dispatcher.Schedule(m.process)
	}
}

// processMessages is one turn: it handles messages until none is left,
// then looks again after marking the mailbox idle, for a message posted
// in between whose schedule saw it running.
func (m *mailbox) processMessages() {
	for {
		m.run(-1)
		m.running.Store(false)
		if !m.more() || !m.running.CompareAndSwap(false, true) {
			return
		}
	}
}

// more reports whether a message waits that the actor may handle now.
func (m *mailbox) more() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sys) > 0 || (!m.suspended.Load() && m.user.len() > 0)
}

// run handles messages until none is left, or, when budget >= 0, until it
// handled budget of them with more waiting, which it then reports.
func (m *mailbox) run(budget int) (stopped bool) {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
			stopped = false
		}
	}()
	for i, t := 0, m.dispatcher.Throughput(); ; i++ {
		if budget >= 0 && i >= budget {
			return m.more()
		}
		if i > t {
			i = 0
			runtime.Gosched()
		}
		m.mu.Lock()
		if len(m.sys) > 0 {
			msg = m.sys[0]
			m.sys[0] = nil
			if m.sys = m.sys[1:]; len(m.sys) == 0 {
				m.sys = nil
			}
			m.mu.Unlock()
			switch msg.(type) {
			case *protoactor.SuspendMailbox:
				m.suspended.Store(true)
			case *protoactor.ResumeMailbox:
				m.suspended.Store(false)
			default:
				m.invoker.InvokeSystemMessage(msg)
			}
			continue
		}
		if m.suspended.Load() {
			m.mu.Unlock()
			return
		}
		msg = m.user.pop()
		m.mu.Unlock()
		if msg == nil {
			return
		}
		m.invoker.InvokeUserMessage(msg)
	}
}

// queue is a FIFO of messages whose buffer comes from a pool while it has
// any, so an idle actor's mailbox holds none.
type queue struct {
	buf  *[]any
	head int
}

var queueBufs = sync.Pool{New: func() any { b := make([]any, 0, 8); return &b }}

func (q *queue) len() int {
	if q.buf == nil {
		return 0
	}
	return len(*q.buf) - q.head
}

func (q *queue) push(msg any) {
	if q.buf == nil {
		q.buf = queueBufs.Get().(*[]any)
	}
	*q.buf = append(*q.buf, msg)
}

// pop returns the oldest message, or nil if there is none.
func (q *queue) pop() any {
	if q.len() == 0 {
		return nil
	}
	b := *q.buf
	msg := b[q.head]
	b[q.head] = nil
	q.head++
	switch {
	case q.head == len(b):
		*q.buf = b[:0]
		if cap(b) <= 64 {
			queueBufs.Put(q.buf)
		}
		q.buf, q.head = nil, 0
	case q.head >= 1024 && q.head*2 >= len(b):
		// A queue that never drains must not grow without bound.
		n := copy(b, b[q.head:])
		clear(b[n:])
		*q.buf, q.head = b[:n], 0
	}
	return msg
}
