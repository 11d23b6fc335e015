package holdfast_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
)

// metrics collects reader's data points into "name{k=v,...}" -> value (sums
// and gauges) and "name{...}#count" (histograms).
func metrics(t *testing.T, reader *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	key := func(name string, set attribute.Set) string {
		var kv []string
		for _, a := range set.ToSlice() {
			kv = append(kv, string(a.Key)+"="+a.Value.Emit())
		}
		return name + "{" + strings.Join(kv, ",") + "}"
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)+"#count"] = float64(p.Count)
				}
			}
		}
	}
	return out
}

// records is a slog handler that keeps every record.
type records struct {
	mu  sync.Mutex
	all []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.all = append(r.all, rec)
	r.mu.Unlock()
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// find returns the attributes of the first record at level whose message
// contains msg.
func (r *records) find(level slog.Level, msg string) (map[string]string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.all {
		if rec.Level == level && strings.Contains(rec.Message, msg) {
			attrs := map[string]string{}
			rec.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
			return attrs, true
		}
	}
	return nil, false
}

func TestMetricsAndLogs(t *testing.T) {
	srv := redistest.Start(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	logs := &records{}
	const lease = time.Second // renewals come every lease/3, even on a loaded machine
	c := newClient(t, srv, holdfast.Config{
		MeterProvider:   mp,
		Logger:          slog.New(logs),
		WatchdogTimeout: lease,
		ClientID:        "metrics",
	})

	held := c.Lock(holdfast.WithOwner(context.Background(), "a"), "m")
	mustAcquire(t, held)
	waiter := c.Lock(context.Background(), "m", holdfast.WithWait(time.Hour))
	eventually(t, "one held and one waiting", func() bool {
		m := metrics(t, reader)
		return m["holdfast.held{}"] == 1 && m["holdfast.waiting{}"] == 1
	})
	time.Sleep(lease) // the watchdog renews
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, waiter)
	// Lose the waiter's hold: its key vanishes, the next renewal finds out.
	srv.Do(t, "DEL", scripts.LockKey("m"))
	mustLose(t, waiter, holdfast.ErrNotOwner)
	timedOut := c.Lock(context.Background(), "other", holdfast.WithWait(0))
	other := c.Lock(context.Background(), "other", holdfast.WithWait(0))
	mustAcquire(t, timedOut)
	mustLose(t, other, holdfast.ErrWaitTimeout)
	if err := timedOut.Release(context.Background()); err != nil {
		t.Fatal(err)
	}

	m := metrics(t, reader)
	for k, want := range map[string]float64{
		"holdfast.acquisitions{outcome=granted}":      3,
		"holdfast.acquisitions{outcome=wait_timeout}": 1,
		"holdfast.held{}":                             0,
		"holdfast.waiting{}":                          0,
		"holdfast.holds.lost{cause=not_owner}":        1,
		"holdfast.wait.duration{}#count":              3,
		"holdfast.hold.duration{}#count":              3,
	} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
	for _, k := range []string{
		"holdfast.renewals{result=ok}",
		"holdfast.renewals{result=not_owner}", // the lost hold's, and maybe a renewal that crossed a release
		"holdfast.redis.duration{result=ok,script=acquire}#count",
		"holdfast.redis.duration{result=ok,script=release}#count",
		"holdfast.redis.duration{result=ok,script=renew}#count",
	} {
		if m[k] < 1 {
			t.Errorf("%s = %v, want at least 1", k, m[k])
		}
	}
	if t.Failed() {
		t.Logf("collected: %v", m)
	}

	if a, ok := logs.find(slog.LevelDebug, "lock granted"); !ok || a["name"] != "m" || a["owner"] != holdfast.Field(c, "a") || a["token"] == "" {
		t.Errorf("grant log %v (found %v), want name, owner and token", a, ok)
	}
	if _, ok := logs.find(slog.LevelDebug, "lock released"); !ok {
		t.Error("no Debug log of the release")
	}
	if a, ok := logs.find(slog.LevelWarn, "lock lost"); !ok || a["name"] != "m" || a["token"] == "" || !strings.Contains(a["cause"], "no longer shows this owner") {
		t.Errorf("lost log %v (found %v), want a Warn with name, token and cause", a, ok)
	}
}

// eventually polls cond for up to waitFor.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s within %v", what, waitFor)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A Lock refused at once (the Client is closed) counts as an acquisition
// ended with that outcome and leaves no waiting Lock behind.
func TestMetricsOfALockAfterClose(t *testing.T) {
	srv := redistest.Start(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	c := newClient(t, srv, holdfast.Config{MeterProvider: mp})
	c.Close()
	mustLose(t, c.Lock(context.Background(), "late"), holdfast.ErrClosed)
	m := metrics(t, reader)
	if m["holdfast.waiting{}"] != 0 || m["holdfast.acquisitions{outcome=closed}"] != 1 {
		t.Fatalf("collected %v, want waiting 0 and one closed acquisition", m)
	}
}

// A Lock without an owner keeps no owner field: its log lines build it from
// the Client and the request's ID. It must be the field Redis holds, under
// either layout, and each Lock's own.
func TestLogsNameTheAnonymousOwnerRedisHolds(t *testing.T) {
	srv := redistest.Start(t)
	for _, layout := range []holdfast.Layout{holdfast.LayoutHoldfast, holdfast.LayoutRedisson} {
		logs := &records{}
		c := newClient(t, srv, holdfast.Config{Logger: slog.New(logs), Layout: layout, ClientID: "anon"})
		ctx := context.Background()
		seen := map[string]bool{}
		for i := range 3 {
			name := fmt.Sprintf("anon-%d-%d", layout, i)
			l := c.Lock(ctx, name)
			mustAcquire(t, l)
			info, err := c.Inspect(ctx, name)
			if err != nil || len(info.Holders) != 1 {
				t.Fatalf("Inspect(%s) = %+v, %v; want one holder", name, info, err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			a, ok := logs.findAttr(slog.LevelDebug, "lock granted", "name", name)
			if !ok || a["owner"] != info.Holders[0].Owner {
				t.Errorf("layout %d: grant log of %s names owner %q (found %v), Redis holds %q", layout, name, a["owner"], ok, info.Holders[0].Owner)
			}
			r, ok := logs.findAttr(slog.LevelDebug, "lock released", "name", name)
			if !ok || r["owner"] != info.Holders[0].Owner {
				t.Errorf("layout %d: release log of %s names owner %q (found %v), want %q", layout, name, r["owner"], ok, info.Holders[0].Owner)
			}
			if seen[a["owner"]] {
				t.Errorf("layout %d: owner %q logged for two Locks", layout, a["owner"])
			}
			seen[a["owner"]] = true
		}
	}
}

// findAttr is find for the first record whose attribute key is val.
func (r *records) findAttr(level slog.Level, msg, key, val string) (map[string]string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.all {
		if rec.Level != level || !strings.Contains(rec.Message, msg) {
			continue
		}
		attrs := map[string]string{}
		rec.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
		if attrs[key] == val {
			return attrs, true
		}
	}
	return nil, false
}
