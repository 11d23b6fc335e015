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
// sends the reply to a (see lockActor.reply).
func (s *System) callScript(a *lockActor, op uint64, c scripts.Call) {
	s.inflight.Add(1)
	j := scriptCalls.Get().(*scriptCall)
	if j.run == nil {
		j.run = j.exec
	}
	j.a, j.b, j.op, j.c = a, s.callBucket(), op, c
	s.workers.Go(j.run)
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
