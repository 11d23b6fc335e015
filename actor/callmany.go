package actor

import (
	"context"

	"github.com/holdfast/holdfast/scripts"
)

// CallResult is the outcome of one script call of a CallMany batch.
type CallResult struct {
	Vals []int64
	Err  error
	// buf holds Vals when they fit: a batch's results are reused from one
	// batch to the next, so decoding a reply allocates nothing. Vals is
	// then only valid until the next batch; the actor copies it into its
	// letter (see lockActor.send).
	buf [replyInline]int64
}

// CallMany runs several script calls at once and puts their outcomes in
// out (len(out) == len(calls)). Config.CallMany, when set, is used for the
// lock actors' calls that queue up while others are on the wire.
type CallMany func(ctx context.Context, calls []scripts.Call, out []CallResult)

// CallMany runs calls in one DoMulti (evalMulti), so rueidis writes them
// to the connection together: one write instead of one per call, and on a
// cluster one pipeline per node. Synced must not use it: its WAIT has to
// follow each call on that call's connection.
func (r *Rueidis) CallMany(ctx context.Context, calls []scripts.Call, out []CallResult) {
	for _, c := range calls {
		if r.lua[c.Script] == nil {
			// Not the kinds' scripts: Call reports the unregistered one.
			for i, c := range calls {
				out[i].Vals, out[i].Err = r.Call(ctx, c)
			}
			return
		}
	}
	for i, res := range r.evalMulti(ctx, calls) {
		msg, err := res.ToMessage()
		if err != nil {
			out[i].Vals, out[i].Err = nil, err
			continue
		}
		out[i].Vals, out[i].Err = intsInto(out[i].buf[:0], msg)
	}
}
