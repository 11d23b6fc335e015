package observe

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/benbjohnson/clock"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/scripts"
)

// fakeRedis classifies every error as transient; Call is not used here.
type fakeRedis struct{}

func (fakeRedis) Call(context.Context, scripts.Call) ([]int64, error) { return nil, nil }
func (fakeRedis) Group() func(string) uint16                          { return nil }
func (fakeRedis) Classify(err error) lockactor.Fault {
	if err == nil {
		return lockactor.NoFault
	}
	return lockactor.Transient
}

// A cluster's renewal pipelines count like single batches: each hold once,
// by result, and each call's latency.
func TestRenewMultiCountsEachHold(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	o, err := New(slog.New(slog.DiscardHandler), mp, clock.NewMock())
	if err != nil {
		t.Fatal(err)
	}
	r := o.Redis(fakeRedis{})
	down := errors.New("connection reset")
	multi := r.RenewMulti(func(_ context.Context, calls []scripts.Call) ([][]bool, []error) {
		return [][]bool{{true, false, true}, nil}, []error{nil, down}
	})
	calls := []scripts.Call{
		{Script: scripts.RenewScript, Keys: []string{"holdfast:{a}", "holdfast:{b}", "holdfast:{c}"}, Args: []string{"c:1", "30000", "c:2", "30000", "c:3", "30000"}},
		{Script: scripts.RenewScript, Keys: []string{"holdfast:{d}", "holdfast:{e}"}, Args: []string{"c:4", "30000", "c:5", "30000"}},
	}
	if _, errs := multi(context.Background(), calls); errs[1] != down {
		t.Fatalf("errors %v not passed through", errs)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	renewals := map[string]int64{}
	var calls64 uint64
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch m.Name {
		case "holdfast.renewals":
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				v, _ := p.Attributes.Value("result")
				renewals[v.AsString()] = p.Value
			}
		case "holdfast.redis.duration":
			for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				calls64 += p.Count
			}
		}
	}
	if renewals["ok"] != 2 || renewals["not_owner"] != 1 || renewals["failed"] != 2 || calls64 != 2 {
		t.Fatalf("renewals %v, %d calls timed; want ok 2, not_owner 1, failed 2, 2 calls", renewals, calls64)
	}
}

// logLines is a slog handler that keeps each record's attributes.
type logLines struct{ recs []map[string]string }

func (h *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (h *logLines) Handle(_ context.Context, rec slog.Record) error {
	a := map[string]string{"level": rec.Level.String(), "msg": rec.Message}
	rec.Attrs(func(at slog.Attr) bool { a[at.Key] = at.Value.String(); return true })
	h.recs = append(h.recs, a)
	return nil
}
func (h *logLines) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logLines) WithGroup(string) slog.Handler      { return h }

// Every batch script counts and logs by its mark, whichever kind's it is: a
// renewal's holds count in holdfast.renewals and a failed one logs each hold
// at Warn with its name (a Redisson key is the name itself) and owner; a
// keep-alive counts nothing and logs each waiter at Info.
func TestBatchesCountAndLogByTheirMark(t *testing.T) {
	for _, s := range scripts.All() {
		if s.Batch == scripts.NoBatch {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			defer mp.Shutdown(context.Background())
			logs := &logLines{}
			o, err := New(slog.New(logs), mp, clock.NewMock())
			if err != nil {
				t.Fatal(err)
			}
			r := o.Redis(fakeRedis{})
			keys := []string{scripts.LockKey("n1"), scripts.LockKey("n2")}
			if s.KeyIsName {
				keys = []string{"n1", "n2"}
			}
			down := errors.New("connection reset")
			multi := r.RenewMulti(func(_ context.Context, calls []scripts.Call) ([][]bool, []error) {
				return [][]bool{{true, true}, nil}, []error{nil, down}
			})
			multi(context.Background(), []scripts.Call{
				{Script: s, Keys: keys, Args: []string{"c:1", "900", "c:2", "900"}},
				{Script: s, Keys: keys, Args: []string{"c:1", "900", "c:2", "900"}},
			})
			var rm metricdata.ResourceMetrics
			if err := reader.Collect(context.Background(), &rm); err != nil {
				t.Fatal(err)
			}
			renewals := map[string]int64{}
			for _, m := range rm.ScopeMetrics[0].Metrics {
				if m.Name == "holdfast.renewals" {
					for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
						v, _ := p.Attributes.Value("result")
						renewals[v.AsString()] = p.Value
					}
				}
			}
			level, want := "INFO", map[string]int64{}
			if s.Batch == scripts.RenewBatch {
				level, want = "WARN", map[string]int64{"ok": 2, "failed": 2}
			}
			if len(renewals) != len(want) || renewals["ok"] != want["ok"] || renewals["failed"] != want["failed"] {
				t.Errorf("renewals %v, want %v", renewals, want)
			}
			if len(logs.recs) != 2 {
				t.Fatalf("%d log lines %v, want one per item of the failed call", len(logs.recs), logs.recs)
			}
			for i, rec := range logs.recs {
				name, owner := []string{"n1", "n2"}[i], []string{"c:1", "c:2"}[i]
				if rec["level"] != level || rec["script"] != s.Name || rec["name"] != name || rec["owner"] != owner {
					t.Errorf("log line %v, want level %s, script %s, name %s, owner %s", rec, level, s.Name, name, owner)
				}
			}
		})
	}
}
