package actor

import (
	"sync"

	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/scripts"
)

// scriptCall is one lock actor's script call on its way through the worker
// pool. Jobs are pooled and their run func is bound once, so a call costs
// no closure allocation: a cycle makes two calls, and each closure pair
// (the actor's and System.call's) was four allocations per cycle.
type scriptCall struct {
	run func() // bound to exec once, on the job's first use

	a  *lockActor
	b  *callBucket
	op uint64
	c  scripts.Call
}

var scriptCalls = sync.Pool{New: func() any { return new(scriptCall) }}

// callScript runs c for actor a on a worker, as System.call would, and
// sends the reply to a (see lockActor.reply). With Config.CallMany, the
// call joins the send queue instead (see sendBatches).
func (s *System) callScript(a *lockActor, op uint64, c scripts.Call) {
	s.inflight.Add(1)
	j := scriptCalls.Get().(*scriptCall)
	if j.run == nil {
		j.run = j.exec
	}
	// The turn's time (lockActor.now) dates the call's timeout: a turn
	// never blocks, so it is the time the call is sent, give or take the
	// turn, and reading the clock again cost each call about 55 ns.
	j.a, j.b, j.op, j.c = a, s.callBucket(a.now), op, c
	if s.cfg.CallMany == nil {
		s.workers.Go(j.run)
		return
	}
	s.sendMu.Lock()
	s.sendQ = append(s.sendQ, j)
	start := s.senders < maxSenders
	if start {
		s.senders++
	}
	s.sendMu.Unlock()
	if start {
		s.workers.Go(s.sendFn)
	}
}

// maxSenders bounds the batches of script calls on the wire at once. A call
// made while that many are out waits for one of them to come back and
// leaves with every call queued by then: under load the calls go out in
// batches (one write to the connection each, not one per call), and an
// idle Client's call goes out at once, alone. Four rather than two: a
// sender hands its batch's replies to their actors one after another, and
// with two the server waited on that while calls queued (four measured 4–9 %
// more uncontended cycles a second, one allocation more per cycle for the
// smaller batches).
const maxSenders = 4

// sendBatches sends the queued script calls, all of them in one CallMany,
// and hands each reply to its actor (whose turn may queue the next calls),
// until the queue is empty.
func (s *System) sendBatches() {
	var buf *sendBuf
	for {
		s.sendMu.Lock()
		if buf == nil {
			buf = s.takeSendBufLocked()
		}
		if len(s.sendQ) == 0 {
			s.senders--
			s.sendBufs = append(s.sendBufs, buf)
			s.sendMu.Unlock()
			return
		}
		jobs := append(buf.jobs[:0], s.sendQ...)
		buf.jobs = jobs
		clear(s.sendQ)
		s.sendQ = s.sendQ[:0]
		s.sendMu.Unlock()

		// The batch's calls share the context of its first call's bucket:
		// the buckets of calls queued together end within a tick or two.
		ctx := jobs[0].b.ctx
		if len(jobs) == 1 {
			jobs[0].exec()
			jobs[0] = nil
			continue
		}
		calls := buf.calls[:0]
		if cap(buf.out) < len(jobs) {
			buf.out = make([]CallResult, len(jobs), 2*len(jobs))
		}
		out := buf.out[:len(jobs)]
		for _, j := range jobs {
			calls = append(calls, j.c)
		}
		buf.calls = calls
		s.cfg.CallMany(ctx, calls, out)
		// The calls leave their buckets, and the in-flight count, by runs
		// rather than one by one: the counters are shared by every caller,
		// and the calls of a batch are mostly of one bucket.
		var (
			left  *callBucket
			leftN int32
		)
		for i, j := range jobs {
			a, b, op := j.a, j.b, j.op
			*j = scriptCall{run: j.run}
			scriptCalls.Put(j)
			a.reply(lockactor.Msg{Kind: lockactor.MsgReply, Op: op, Reply: out[i].Vals, Err: out[i].Err, Fault: s.cfg.Redis.Classify(out[i].Err)})
			if b != left {
				if left != nil {
					left.leaveN(leftN)
				}
				left, leftN = b, 0
			}
			leftN++
		}
		left.leaveN(leftN)
		s.inflight.Add(-len(jobs))
		clear(calls)
		clear(out)
		clear(jobs)
	}
}

// sendBuf is a sender's batch buffers. A sender ends whenever the queue is
// empty, which an idle or lightly loaded Client's are after every batch:
// buffers made afresh by each were three allocations per batch, about a
// third of an allocation and 300 bytes per uncontended cycle.
type sendBuf struct {
	jobs  []*scriptCall
	calls []scripts.Call
	out   []CallResult
}

// takeSendBufLocked returns the buffers a sender that ended left, or new
// ones. At most maxSenders senders run at once, so at most that many
// buffers are kept.
func (s *System) takeSendBufLocked() *sendBuf {
	if n := len(s.sendBufs); n > 0 {
		b := s.sendBufs[n-1]
		s.sendBufs[n-1] = nil
		s.sendBufs = s.sendBufs[:n-1]
		return b
	}
	return new(sendBuf)
}

// exec runs the call, then puts the job back before the reply is sent: the
// reply may run the actor's turn on this goroutine, and nothing of the job
// is read after it is released.
func (j *scriptCall) exec() {
	a, b, op, c := j.a, j.b, j.op, j.c
	*j = scriptCall{run: j.run}
	scriptCalls.Put(j)
	s := a.sys
	defer s.inflight.Done()
	defer b.leave()
	vals, err := s.cfg.Redis.Call(b.ctx, c)
	a.reply(lockactor.Msg{Kind: lockactor.MsgReply, Op: op, Reply: vals, Err: err, Fault: s.cfg.Redis.Classify(err)})
}

// leaveN is n calls' leave at once.
func (b *callBucket) leaveN(n int32) {
	if b.users.Add(-n) == 0 && b.users.CompareAndSwap(0, -1) {
		b.timer.Stop()
		b.cancel()
	}
}
