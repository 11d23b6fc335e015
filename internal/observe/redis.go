package observe

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/holdfast/holdfast/actor"
	"github.com/holdfast/holdfast/renewal"
	"github.com/holdfast/holdfast/scripts"
)

// callAttrs holds the prebuilt attribute sets of script-call latency, by
// script and by whether the call returned an error.
var callAttrs = func() map[*scripts.Script][2]metric.RecordOption {
	m := make(map[*scripts.Script][2]metric.RecordOption)
	for _, s := range scripts.All() {
		m[s] = [2]metric.RecordOption{
			metric.WithAttributeSet(attribute.NewSet(attribute.String("script", s.Name), attribute.String("result", "ok"))),
			metric.WithAttributeSet(attribute.NewSet(attribute.String("script", s.Name), attribute.String("result", "error"))),
		}
	}
	return m
}()

// Redis wraps r so that every script call's latency is recorded and every
// failure logged. The runtime uses it in place of r, for the actors' calls
// and, through Renew, for the renewal batches.
func (o *Observer) Redis(r actor.Redis) *Redis { return &Redis{r, o} }

// Redis is an actor.Redis that observes the calls of the one it wraps.
type Redis struct {
	actor.Redis
	o *Observer
}

// Call implements actor.Redis.
func (r *Redis) Call(ctx context.Context, c scripts.Call) ([]int64, error) {
	start := r.now()
	vals, err := r.Redis.Call(ctx, c)
	r.called(c, start, err)
	return vals, err
}

// now returns the start time of a call: the zero time when no latency is
// recorded.
func (r *Redis) now() time.Time {
	if !r.o.metrics {
		return time.Time{}
	}
	return r.o.clk.Now()
}

// called records the latency of call c, started at start, and logs its
// failure, once per lock name it touched.
func (r *Redis) called(c scripts.Call, start time.Time, err error) {
	r.calledIn(nil, 0, c, start, err)
}

// calledIn is called for call number n of a renewal Exec or ExecMulti
// whose context is ctx (nil for any other call): the log of a failed
// renewal names each hold with its fencing token (renewal.Token), so that
// an operator can match it with the writes a fenced store refused.
func (r *Redis) calledIn(ctx context.Context, n int, c scripts.Call, start time.Time, err error) {
	o := r.o
	if o.metrics {
		if attrs, ok := callAttrs[c.Script]; ok {
			result := attrs[0]
			if err != nil {
				result = attrs[1]
			}
			o.calls.Record(context.Background(), o.clk.Since(start).Seconds(), result)
		}
	}
	if err == nil {
		return
	}
	fault := r.Classify(err)
	if c.Script.Batch != scripts.NoBatch {
		// A batch of any kind's holds or waiters: keys are their keys,
		// args field, lease pairs.
		for i, k := range c.Keys {
			var token uint64
			if ctx != nil {
				token = renewal.Token(ctx, n, i)
			}
			o.callFailed(c.Script, c.Script.LockName(k), c.Args[2*i], token, fault, err)
		}
		return
	}
	if len(c.Keys) > 0 {
		o.callFailed(c.Script, c.Script.LockName(c.Keys[0]), "", 0, fault, err)
	}
}

// renewed counts each hold of a watchdog batch as one renewal, whichever
// kind's script renewed it; a batch of waiters' places counts nothing.
func (r *Redis) renewed(s *scripts.Script, keys int, renewed []bool, err error) {
	o, bg := r.o, context.Background()
	if !o.metrics || s.Batch != scripts.RenewBatch {
		return
	}
	if err != nil {
		o.renewals.Add(bg, int64(keys), renewFailed)
		return
	}
	ok := 0
	for _, b := range renewed {
		if b {
			ok++
		}
	}
	o.renewals.Add(bg, int64(ok), renewOK)
	if n := len(renewed) - ok; n > 0 {
		o.renewals.Add(bg, int64(n), renewNotOwner)
	}
}

// Renew runs a batch of the renewal shape (see renewal.Exec) through Call.
func (r *Redis) Renew(ctx context.Context, s *scripts.Script, keys, args []string) ([]bool, error) {
	c := scripts.Call{Script: s, Keys: keys, Args: args}
	start := r.now()
	vals, err := r.Redis.Call(ctx, c)
	r.calledIn(ctx, 0, c, start, err)
	var out []bool
	if err == nil {
		out = make([]bool, len(vals))
		for i, v := range vals {
			out[i] = v == 1
		}
	}
	r.renewed(s, len(keys), out, err)
	return out, err
}

// CallMany wraps many so that each of its calls is observed as Call's are.
func (r *Redis) CallMany(many actor.CallMany) actor.CallMany {
	return func(ctx context.Context, calls []scripts.Call, out []actor.CallResult) {
		start := r.now()
		many(ctx, calls, out)
		for i, c := range calls {
			r.called(c, start, out[i].Err)
		}
	}
}

// RenewMulti observes multi (a cluster's renewal pipelines) as Renew does
// single batches; each call's latency is the whole pipeline's.
func (r *Redis) RenewMulti(multi renewal.ExecMulti) renewal.ExecMulti {
	return func(ctx context.Context, calls []scripts.Call) ([][]bool, []error) {
		start := r.now()
		out, errs := multi(ctx, calls)
		for i, c := range calls {
			var renewed []bool
			var err error
			if i < len(out) {
				renewed = out[i]
			}
			if i < len(errs) {
				err = errs[i]
			}
			r.calledIn(ctx, i, c, start, err)
			r.renewed(c.Script, len(c.Keys), renewed, err)
		}
		return out, errs
	}
}
