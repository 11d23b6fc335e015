package actor

import "sync"

// pool runs functions on reused goroutines. Lock actors hop between
// goroutines for every message batch and every script call; a fresh
// goroutine each time would pay for its creation and for growing its stack
// through rueidis's call path again and again. A pool keeps warm ones.
//
// It also serves as protoactor's Dispatcher for the lock actors, so every
// goroutine of the runtime is owned here and ends at close.
type pool struct {
	throughput int

	wg sync.WaitGroup
	mu sync.Mutex // guards the fields below
	// idle holds the hand-off channels of parked workers, most recent last.
	idle   []chan func()
	closed bool
	// tails counts the goroutines between tailBegin and tailEnd: each will
	// run one function of queued before it returns, so Go hands work to
	// them rather than waking a parked worker.
	tails  int
	queued []func()
}

// maxIdle bounds the parked workers; extra ones exit.
const maxIdle = 512

// Schedule implements protoactor's Dispatcher: runs fn on a pool goroutine.
func (p *pool) Schedule(fn func()) { p.Go(fn) }

// Throughput implements protoactor's Dispatcher: messages an actor handles
// before yielding its goroutine.
func (p *pool) Throughput() int { return p.throughput }

// Go runs fn on a goroutine about to finish (see tailBegin), on a parked
// worker, or on a new one.
func (p *pool) Go(fn func()) {
	p.mu.Lock()
	if len(p.queued) < p.tails {
		p.queued = append(p.queued, fn)
		p.mu.Unlock()
		return
	}
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w <- fn
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	go p.work(fn)
}

func (p *pool) work(fn func()) {
	defer p.wg.Done()
	next := make(chan func(), 1)
	for {
		fn()
		p.mu.Lock()
		if p.closed || len(p.idle) >= maxIdle {
			p.mu.Unlock()
			return
		}
		p.idle = append(p.idle, next)
		p.mu.Unlock()
		if fn = <-next; fn == nil {
			return
		}
	}
}

// tailBegin and tailEnd bracket the last thing a pool goroutine does, when
// that thing hands work to the pool: typically a script call's reply, which
// schedules the lock actor's mailbox. The work runs on this goroutine at
// tailEnd instead of waking a parked worker: one goroutine wake-up less per
// Redis call.
func (p *pool) tailBegin() {
	p.mu.Lock()
	p.tails++
	p.mu.Unlock()
}

func (p *pool) tailEnd() {
	p.mu.Lock()
	p.tails--
	var fn func()
	if n := len(p.queued); n > p.tails {
		fn = p.queued[0]
		copy(p.queued, p.queued[1:])
		p.queued[n-1] = nil
		p.queued = p.queued[:n-1]
	}
	p.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// close ends the parked workers and waits for the busy ones to finish.
// Go must not be called after close.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	for _, w := range p.idle {
		close(w)
	}
	p.idle = nil
	p.mu.Unlock()
	p.wg.Wait()
}
