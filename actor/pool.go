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
}

// maxIdle bounds the parked workers; extra ones exit.
const maxIdle = 512

// Schedule implements protoactor's Dispatcher: runs fn on a pool goroutine.
func (p *pool) Schedule(fn func()) { p.Go(fn) }

// Throughput implements protoactor's Dispatcher: messages an actor handles
// before yielding its goroutine.
func (p *pool) Throughput() int { return p.throughput }

// Go runs fn on a parked worker, or a new one.
func (p *pool) Go(fn func()) {
	p.mu.Lock()
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
