package actor

import (
	"context"
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
	// rueidis runs the calls of one Lua together; group them by script.
	byScript := map[*scripts.Script][]int{}
	for i, c := range calls {
		byScript[c.Script] = append(byScript[c.Script], i)
	}
	for script, idx := range byScript {
		lua := r.lua[script]
		if lua == nil {
			for _, i := range idx {
				errs[i] = errors.New("holdfast: renew script not registered with scripts.NewScript")
			}
			continue
		}
		execs := make([]rueidis.LuaExec, len(idx))
		for j, i := range idx {
			execs[j] = rueidis.LuaExec{Keys: calls[i].Keys, Args: calls[i].Args}
		}
		res := lua.ExecMulti(ctx, r.client, execs...)
		for j, i := range idx {
			if j >= len(res) {
				errs[i] = errors.New("holdfast: renew pipeline answered fewer calls than sent")
				continue
			}
			vals, err := res[j].AsIntSlice()
			if err != nil {
				errs[i] = err
				continue
			}
			out[i] = make([]bool, len(vals))
			for k, v := range vals {
				out[i][k] = v == 1
			}
		}
	}
	return out, errs
}
