// Package observe is holdfast's instrumentation: the slog events and the
// OpenTelemetry metrics of a Client. The runtime calls it at three seams —
// the Lock handle (granted, over), every script call (a decorator of
// actor.Redis) and every renewal batch (a decorator of renewal.Exec) — so
// the lock machinery itself carries no instrumentation code.
//
// # Concurrency
//
// An Observer is safe for concurrent use and starts no goroutine. Its
// instruments come from the MeterProvider the Client was given (a no-op one
// by default), so with neither a logger nor a provider configured each event
// costs a few no-op calls.
package observe

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/scripts"
)

// ScopeName is the instrumentation scope of holdfast's meter.
const ScopeName = "github.com/holdfast/holdfast"

// Observer turns lock events into logs and metrics.
type Observer struct {
	log *slog.Logger
	clk clock.Clock
	// metrics is false without a MeterProvider: the instruments are no-ops
	// then, and skipping them spares the lock path their argument slices.
	metrics bool

	acquisitions metric.Int64Counter
	waitTime     metric.Float64Histogram
	holdTime     metric.Float64Histogram
	renewals     metric.Int64Counter
	lost         metric.Int64Counter
	held         metric.Int64UpDownCounter
	waiting      metric.Int64UpDownCounter
	calls        metric.Float64Histogram

	mu sync.Mutex // guards lastLog
	// lastLog is when each lock name last logged a transient Redis error;
	// entries older than logEvery are dropped as the map is swept.
	lastLog map[string]time.Time
	swept   time.Time
}

// logEvery bounds how often one name logs transient errors.
const logEvery = time.Second

// New returns an Observer logging to log (required) and recording on mp
// (nil: no metrics).
func New(log *slog.Logger, mp metric.MeterProvider, clk clock.Clock) (*Observer, error) {
	o := &Observer{log: log, clk: clk, metrics: mp != nil, lastLog: make(map[string]time.Time)}
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter(ScopeName)
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	o.acquisitions, err = m.Int64Counter("holdfast.acquisitions",
		metric.WithDescription("Lock calls that ended pending or were granted, by outcome"))
	add(err)
	o.waitTime, err = m.Float64Histogram("holdfast.wait.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from Lock to the grant"))
	add(err)
	o.holdTime, err = m.Float64Histogram("holdfast.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from the grant to the end of the hold"))
	add(err)
	o.renewals, err = m.Int64Counter("holdfast.renewals",
		metric.WithDescription("Watchdog renewals of one hold, by result (ok, not_owner, failed)"))
	add(err)
	o.lost, err = m.Int64Counter("holdfast.holds.lost",
		metric.WithDescription("Holds that ended without Release, context or Close, by cause"))
	add(err)
	o.held, err = m.Int64UpDownCounter("holdfast.held",
		metric.WithDescription("Locks held now"))
	add(err)
	o.waiting, err = m.Int64UpDownCounter("holdfast.waiting",
		metric.WithDescription("Locks pending now"))
	add(err)
	o.calls, err = m.Float64Histogram("holdfast.redis.duration", metric.WithUnit("s"),
		metric.WithDescription("Latency of holdfast's Redis script calls, by script and result"))
	add(err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return o, nil
}

// Attribute sets, built once: recording with a prebuilt set allocates
// nothing on the SDK's fast path.
var (
	outcomeGranted = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", "granted")))
	renewOK        = metric.WithAttributeSet(attribute.NewSet(attribute.String("result", "ok")))
	renewNotOwner  = metric.WithAttributeSet(attribute.NewSet(attribute.String("result", "not_owner")))
	renewFailed    = metric.WithAttributeSet(attribute.NewSet(attribute.String("result", "failed")))
)

// Cause names the reason a Lock ended, for the outcome and cause attributes.
func Cause(err error) string {
	switch {
	case err == nil:
		return "none"
	case errors.Is(err, lockactor.ErrReleased):
		return "released"
	case errors.Is(err, lockactor.ErrWaitTimeout):
		return "wait_timeout"
	case errors.Is(err, lockactor.ErrLeaseExpired):
		return "lease_expired"
	case errors.Is(err, lockactor.ErrNotOwner):
		return "not_owner"
	case errors.Is(err, lockactor.ErrClosed):
		return "closed"
	case errors.Is(err, lockactor.ErrRedis):
		return "redis_error"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "context"
	case errors.Is(err, lockactor.ErrInvalidName), errors.Is(err, lockactor.ErrInvalidOption):
		return "invalid"
	}
	return "other"
}

// Times are one Lock's timings, for the wait and hold histograms: kept
// with metrics only (Start returns nil without them).
type Times struct{ started, granted time.Time }

// Owner gives a Lock's owner field when a log line needs it: a Lock keeps
// the parts it is built from rather than the string (a client may hold a
// hundred thousand Locks).
type Owner interface{ OwnerField() string }

// Start notes a new pending Lock, and returns its Times (nil without
// metrics). Granted and Ended follow it, called by the lock's actor one at
// a time (Granted before Ended).
func (o *Observer) Start() *Times {
	if !o.metrics {
		return nil
	}
	o.waiting.Add(context.Background(), 1)
	return &Times{started: o.clk.Now()}
}

// Granted notes the grant of the Lock of name with its fencing token.
func (o *Observer) Granted(t *Times, name string, owner Owner, token uint64) {
	ctx := context.Background()
	if o.metrics {
		t.granted = o.clk.Now()
		o.waiting.Add(ctx, -1)
		o.held.Add(ctx, 1)
		o.acquisitions.Add(ctx, 1, outcomeGranted)
		o.waitTime.Record(ctx, t.granted.Sub(t.started).Seconds())
	}
	if o.log.Enabled(ctx, slog.LevelDebug) {
		o.log.Debug("holdfast: lock granted", "name", name, "owner", owner.OwnerField(), "token", token)
	}
}

// Ended notes the end of the Lock of name (granted with token, if held),
// with the cause it ended with.
func (o *Observer) Ended(t *Times, name string, owner Owner, token uint64, held bool, err error) {
	ctx := context.Background()
	cause := Cause(err)
	if !held {
		if o.metrics {
			o.waiting.Add(ctx, -1)
			o.acquisitions.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", cause)))
		}
		if cause == "redis_error" {
			o.log.Warn("holdfast: lock refused by Redis", "name", name, "owner", owner.OwnerField(), "cause", err)
		}
		return
	}
	if o.metrics {
		o.held.Add(ctx, -1)
		o.holdTime.Record(ctx, o.clk.Now().Sub(t.granted).Seconds())
	}
	switch cause {
	case "released", "context", "closed":
		if o.log.Enabled(ctx, slog.LevelDebug) {
			o.log.Debug("holdfast: lock released", "name", name, "owner", owner.OwnerField(), "token", token, "cause", err)
		}
	default:
		if o.metrics {
			o.lost.Add(ctx, 1, metric.WithAttributes(attribute.String("cause", cause)))
		}
		o.log.Warn("holdfast: lock lost", "name", name, "owner", owner.OwnerField(), "token", token, "cause", err)
	}
}

// callFailed logs a failed script call on name (of owner field and the
// hold's fencing token, when known: a renewal): a permanent refusal at Warn
// every time, anything else at most once per name per logEvery.
func (o *Observer) callFailed(s *scripts.Script, name, field string, token uint64, fault lockactor.Fault, err error) {
	script := s.Name
	if fault == lockactor.Permanent {
		o.log.Warn("holdfast: Redis refused a call", "script", script, "name", name, "cause", err)
		return
	}
	if !o.mayLog(name) {
		return
	}
	level := slog.LevelInfo
	if s.Batch == scripts.RenewBatch {
		// A hold's lease did not move: it may be lost if this goes on.
		level = slog.LevelWarn
	}
	if field == "" {
		o.log.Log(context.Background(), level, "holdfast: Redis call failed, retrying", "script", script, "name", name, "cause", err)
		return
	}
	if token == 0 {
		o.log.Log(context.Background(), level, "holdfast: Redis call failed, retrying", "script", script, "name", name, "owner", field, "cause", err)
		return
	}
	o.log.Log(context.Background(), level, "holdfast: Redis call failed, retrying", "script", script, "name", name, "owner", field, "token", token, "cause", err)
}

// mayLog reports whether name may log a transient error now, and if so
// notes that it did.
func (o *Observer) mayLog(name string) bool {
	now := o.clk.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if last, ok := o.lastLog[name]; ok && now.Sub(last) < logEvery {
		return false
	}
	o.lastLog[name] = now
	if now.Sub(o.swept) >= logEvery {
		o.swept = now
		for n, t := range o.lastLog {
			if now.Sub(t) >= logEvery {
				delete(o.lastLog, n)
			}
		}
	}
	return true
}
