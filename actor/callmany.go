package actor

import (
	"context"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/scripts"
)

// CallResult is the outcome of one script call of a CallMany batch.
type CallResult struct {
	Vals []int64
	Err  error
}

// CallMany runs several script calls at once and puts their outcomes in
// out (len(out) == len(calls)). Config.CallMany, when set, is used for the
// lock actors' calls that queue up while others are on the wire.
type CallMany func(ctx context.Context, calls []scripts.Call, out []CallResult)

// CallMany runs calls in one DoMulti, so rueidis writes them to the
// connection together (one write instead of one per call; on a cluster one
// pipeline per node), with an EVAL for each call the server lacks the
// script of. Synced must not use it: its WAIT has to follow each call on
// that call's connection.
func (r *Rueidis) CallMany(ctx context.Context, calls []scripts.Call, out []CallResult) {
	cmds := make(rueidis.Commands, len(calls))
	for i, c := range calls {
		if r.lua[c.Script] == nil {
			// Call reports the unregistered script.
			cmds[i] = r.client.B().Ping().Build()
			continue
		}
		cmds[i] = r.evalsha(c)
	}
	res := r.client.DoMulti(ctx, cmds...)
	for i, c := range calls {
		if r.lua[c.Script] == nil {
			out[i].Vals, out[i].Err = r.Call(ctx, c)
			continue
		}
		if rerr, ok := rueidis.IsRedisErr(res[i].Error()); ok && rerr.IsNoScript() {
			// Call loads the script (EVAL) and runs it.
			out[i].Vals, out[i].Err = r.Call(ctx, c)
			continue
		}
		msg, err := res[i].ToMessage()
		if err != nil {
			out[i].Vals, out[i].Err = nil, err
			continue
		}
		out[i].Vals, out[i].Err = ints(msg)
	}
}
