package actor

import (
	"runtime"
	"sync"
)

// pool runs the runtime's work on goroutines it owns, all of which end at
// close. It has two kinds:
//
//   - runners, at most maxRunners, take the lock actors' turns from a FIFO
//     run queue (pool is protoactor's Dispatcher for them). A turn never
//     blocks, so a few runners keep the cores busy however many actors are
//     ready — a wheel tick that fires thousands of renewals queues thousands
//     of turns, not thousands of goroutines whose stacks grow and die.
//   - workers run script calls (Go), which block for a round trip. Parked
//     workers are reused: a fresh goroutine each time would pay for its
//     creation and for growing its stack through rueidis's call path.
type pool struct {
	throughput int
	maxRunners int

	wg sync.WaitGroup
	mu sync.Mutex // guards the fields below
	// runq[runHead:] are the turns waiting for a runner.
	runq    []func()
	runHead int
	runners int // runner goroutines started and not ended
	parked  int // runners waiting on wake
	wake    sync.Cond
	// idle holds the hand-off channels of parked workers, most recent last.
	idle   []chan func()
	closed bool
}

// maxIdle bounds the parked workers; extra ones exit.
const maxIdle = 512

// newPool returns a pool whose actors handle throughput messages a turn, on
// as many runners as the Go scheduler has processors (at least two).
func newPool(throughput int) *pool {
	p := &pool{throughput: throughput, maxRunners: max(2, runtime.GOMAXPROCS(0))}
	p.wake.L = &p.mu
	return p
}

// Schedule implements protoactor's Dispatcher: runs the actor turn fn on a
// runner. Once the pool
// is closed it drops fn: every actor has stopped by then, and a sender
// whose letter another runner already handled may still be scheduling a
// turn with nothing left in it (a runner started then would race with
// close's wait).
func (p *pool) Schedule(fn func()) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.runq = append(p.runq, fn)
	switch {
	case p.parked > 0:
		p.wake.Signal()
	case p.runners < p.maxRunners:
		p.runners++
		p.wg.Add(1)
		go p.run()
	}
	p.mu.Unlock()
}

// run is a runner: it takes turns from the run queue until the pool closes.
func (p *pool) run() {
	defer p.wg.Done()
	p.mu.Lock()
	for {
		if p.runHead < len(p.runq) {
			fn := p.runq[p.runHead]
			p.runq[p.runHead] = nil
			p.runHead++
			switch {
			case p.runHead == len(p.runq):
				p.runq, p.runHead = p.runq[:0], 0
			case p.runHead >= 1024 && p.runHead*2 >= len(p.runq):
				// Under steady load the queue may never empty: drop the
				// consumed prefix so it does not grow without bound.
				n := copy(p.runq, p.runq[p.runHead:])
				clear(p.runq[n:])
				p.runq, p.runHead = p.runq[:n], 0
			}
			p.mu.Unlock()
			fn()
			p.mu.Lock()
			continue
		}
		if p.closed {
			p.runners--
			p.mu.Unlock()
			return
		}
		p.parked++
		p.wake.Wait()
		p.parked--
	}
}

// Throughput implements protoactor's Dispatcher: messages an actor handles
// before yielding its goroutine.
func (p *pool) Throughput() int { return p.throughput }

// Go runs fn on a parked worker, or on a new one.
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

// close ends the parked workers and the runners, once the run queue is
// empty, and waits for the busy ones to finish. Go and Schedule must not be
// called after close.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	p.wake.Broadcast()
	for _, w := range p.idle {
		close(w)
	}
	p.idle = nil
	p.mu.Unlock()
	p.wg.Wait()
}
