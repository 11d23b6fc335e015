package actor

import (
	"context"
	"errors"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/renewal"
)

// RenewMulti runs several renew calls in one DoMulti: on a cluster rueidis
// sends each node its calls as one pipeline. Synced must not use it (its
// WAIT would have to follow each call on that call's connection), so the
// Client passes it to the renewal batcher only without SyncReplicas.
func (r *Rueidis) RenewMulti(ctx context.Context, calls []renewal.Call) ([][]bool, []error) {
	execs := make([]rueidis.LuaExec, len(calls))
	for i, c := range calls {
		execs[i] = rueidis.LuaExec{Keys: c.Keys, Args: c.Args}
	}
	res := r.renew.ExecMulti(ctx, r.client, execs...)
	out := make([][]bool, len(calls))
	errs := make([]error, len(calls))
	for i := range calls {
		if i >= len(res) {
			errs[i] = errors.New("holdfast: renew pipeline answered fewer calls than sent")
			continue
		}
		vals, err := res[i].AsIntSlice()
		if err != nil {
			errs[i] = err
			continue
		}
		out[i] = make([]bool, len(vals))
		for j, v := range vals {
			out[i][j] = v == 1
		}
	}
	return out, errs
}
