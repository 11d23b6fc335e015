package observe

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/holdfast/holdfast/actor"
	"github.com/holdfast/holdfast/lockactor"
)

// callAttrs holds the prebuilt attribute sets of script-call latency, by
// script and by whether the call returned an error.
var callAttrs = func() map[string][2]metric.RecordOption {
	m := make(map[string][2]metric.RecordOption)
	for _, s := range []string{"acquire", "release", "handoff", "renew"} {
		m[s] = [2]metric.RecordOption{
			metric.WithAttributeSet(attribute.NewSet(attribute.String("script", s), attribute.String("result", "ok"))),
			metric.WithAttributeSet(attribute.NewSet(attribute.String("script", s), attribute.String("result", "error"))),
		}
	}
	return m
}()

// Redis wraps r so that every script call's latency is recorded and every
// failure logged. The runtime uses it in place of r.
func (o *Observer) Redis(r actor.Redis) actor.Redis { return &redis{r, o} }

type redis struct {
	actor.Redis
	o *Observer
}

// now returns the start time of a call: the zero time when no latency is
// recorded.
func (r *redis) now() time.Time {
	if !r.o.metrics {
		return time.Time{}
	}
	return r.o.clk.Now()
}

func (r *redis) done(script, name, field string, start time.Time, err error) {
	o := r.o
	if o.metrics {
		attrs := callAttrs[script]
		result := attrs[0]
		if err != nil {
			result = attrs[1]
		}
		o.calls.Record(context.Background(), o.clk.Since(start).Seconds(), result)
	}
	if err != nil {
		o.callFailed(script, name, field, r.Classify(err), err)
	}
}

// Acquire implements actor.Redis.
func (r *redis) Acquire(ctx context.Context, name, field string, lease time.Duration, expected int64) (lockactor.AcquireResult, error) {
	start := r.now()
	res, err := r.Redis.Acquire(ctx, name, field, lease, expected)
	r.done("acquire", name, field, start, err)
	return res, err
}

// Release implements actor.Redis.
func (r *redis) Release(ctx context.Context, name, field string, expected int64) (int64, error) {
	start := r.now()
	left, err := r.Redis.Release(ctx, name, field, expected)
	r.done("release", name, field, start, err)
	return left, err
}

// Handoff implements actor.Redis.
func (r *redis) Handoff(ctx context.Context, name, from, to string, lease time.Duration) (int64, lockactor.AcquireResult, error) {
	start := r.now()
	left, res, err := r.Redis.Handoff(ctx, name, from, to, lease)
	r.done("handoff", name, to, start, err)
	return left, res, err
}

// Renew implements actor.Redis: one batch, args being field, lease pairs.
// Each hold in it counts as one renewal.
func (r *redis) Renew(ctx context.Context, keys, args []string) ([]bool, error) {
	o := r.o
	start := r.now()
	renewed, err := r.Redis.Renew(ctx, keys, args)
	if !o.metrics && err == nil {
		return renewed, err
	}
	bg := context.Background()
	if err != nil {
		if o.metrics {
			o.calls.Record(bg, o.clk.Since(start).Seconds(), callAttrs["renew"][1])
			o.renewals.Add(bg, int64(len(keys)), renewFailed)
		}
		fault := r.Classify(err)
		for i, k := range keys {
			o.callFailed("renew", nameOf(k), args[2*i], fault, err)
		}
		return renewed, err
	}
	o.calls.Record(bg, o.clk.Since(start).Seconds(), callAttrs["renew"][0])
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
	return renewed, err
}
