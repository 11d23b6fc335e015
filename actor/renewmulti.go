package actor

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/scripts"
)

// RenewMulti runs several batch calls in one DoMulti: on a cluster rueidis
// sends each node its calls as one pipeline. Synced must not use it (its
// WAIT has to follow each call on that call's connection), so the Client
// gives it to the renewal batcher only without SyncReplicas.
func (r *Rueidis) RenewMulti(ctx context.Context, calls []scripts.Call) ([][]bool, []error) {
	out := make([][]bool, len(calls))
	errs := make([]error, len(calls))
	send := make([]scripts.Call, 0, len(calls))
	idx := make([]int, 0, len(calls))
	for i, c := range calls {
		if r.lua[c.Script] == nil {
			errs[i] = errors.New("holdfast: renew script not registered with scripts.NewScript")
			continue
		}
		send = append(send, c)
		idx = append(idx, i)
	}
	for j, res := range r.evalMulti(ctx, send) {
		out[idx[j]], errs[idx[j]] = bools(res)
	}
	return out, errs
}

// evalMulti runs calls in one DoMulti by EVALSHA, then those whose script
// the server lacks in a second DoMulti by EVAL (which loads it), and
// returns each call's result, in order. Every call's script must be
// registered (scripts.NewScript).
func (r *Rueidis) evalMulti(ctx context.Context, calls []scripts.Call) []rueidis.RedisResult {
	cmds := make(rueidis.Commands, len(calls))
	for i, c := range calls {
		cmds[i] = r.evalsha(c)
	}
	res := r.client.DoMulti(ctx, cmds...)
	var again rueidis.Commands
	var againIdx []int
	for i, rr := range res {
		if rerr, ok := rueidis.IsRedisErr(rr.Error()); ok && rerr.IsNoScript() {
			c := calls[i]
			again = append(again, r.client.B().Eval().Script(r.source(c.Script)).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(c.Args...).Build())
			againIdx = append(againIdx, i)
		}
	}
	if len(again) > 0 {
		for j, rr := range r.client.DoMulti(ctx, again...) {
			res[againIdx[j]] = rr
		}
	}
	return res
}

// evalsha builds the EVALSHA of c.
func (r *Rueidis) evalsha(c scripts.Call) rueidis.Completed {
	return r.client.B().Evalsha().Sha1(r.sha1(c.Script)).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(c.Args...).Build()
}

func bools(res rueidis.RedisResult) ([]bool, error) {
	vals, err := res.AsIntSlice()
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(vals))
	for k, v := range vals {
		out[k] = v == 1
	}
	return out, nil
}

// sha1 is the SHA1 of the source r runs for script: what EVALSHA names.
func (r *Rueidis) sha1(script *scripts.Script) string {
	if v, ok := r.shas.Load(script); ok {
		return v.(string)
	}
	sum := sha1.Sum([]byte(r.source(script)))
	h := hex.EncodeToString(sum[:])
	r.shas.Store(script, h)
	return h
}
