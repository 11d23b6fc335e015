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
