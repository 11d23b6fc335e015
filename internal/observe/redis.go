package observe

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/holdfast/holdfast/actor"
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
	o := r.o
	var start time.Time
	if o.metrics {
		start = o.clk.Now()
	}
	vals, err := r.Redis.Call(ctx, c)
	if o.metrics {
		if attrs, ok := callAttrs[c.Script]; ok {
			result := attrs[0]
			if err != nil {
				result = attrs[1]
			}
			o.calls.Record(context.Background(), o.clk.Since(start).Seconds(), result)
		}
	}
	if err != nil {
		r.failed(c, err)
	}
	return vals, err
}

// failed logs a failed call, once per lock name it touched.
func (r *Redis) failed(c scripts.Call, err error) {
	fault := r.Classify(err)
	if c.Script == scripts.RenewScript {
		// A batch: keys are lock keys, args field, lease pairs.
		for i, k := range c.Keys {
			r.o.callFailed(c.Script.Name, nameOf(k), c.Args[2*i], fault, err)
		}
		return
	}
	if len(c.Keys) > 0 {
		r.o.callFailed(c.Script.Name, nameOf(c.Keys[0]), "", fault, err)
	}
}

// Renew runs a batch of the renewal shape (see renewal.Exec) through Call,
// and counts each hold of a watchdog batch as one renewal.
func (r *Redis) Renew(ctx context.Context, s *scripts.Script, keys, args []string) ([]bool, error) {
	vals, err := r.Call(ctx, scripts.Call{Script: s, Keys: keys, Args: args})
	o, bg := r.o, context.Background()
	count := o.metrics && s == scripts.RenewScript
	if err != nil {
		if count {
			o.renewals.Add(bg, int64(len(keys)), renewFailed)
		}
		return nil, err
	}
	out := make([]bool, len(vals))
	ok := 0
	for i, v := range vals {
		out[i] = v == 1
		if out[i] {
			ok++
		}
	}
	if count {
		o.renewals.Add(bg, int64(ok), renewOK)
		if n := len(vals) - ok; n > 0 {
			o.renewals.Add(bg, int64(n), renewNotOwner)
		}
	}
	return out, nil
}

// nameOf returns the lock name in a key of holdfast's layout: what its
// hash tag holds (holdfast:{NAME} or holdfast:{NAME}:suffix). Names may
// contain '}', so the tag ends at the last one.
func nameOf(key string) string {
	i, j := strings.IndexByte(key, '{'), strings.LastIndexByte(key, '}')
	if i < 0 || j <= i {
		return key
	}
	return key[i+1 : j]
}
