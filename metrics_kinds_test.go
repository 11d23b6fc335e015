package holdfast_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
)

// TestMetricRenewalsOfEveryKind: a hold of any kind, held for two leases
// under a short watchdog, counts its renewals in holdfast.renewals, and the
// calls that carried them in holdfast.redis.duration under its kind's
// renewal script.
func TestMetricRenewalsOfEveryKind(t *testing.T) {
	srv := redistest.Start(t)
	const lease = 900 * time.Millisecond // renewals every 300ms
	for _, tc := range []struct {
		kind   string
		layout holdfast.Layout
		script string
		lock   func(c *holdfast.Client, ctx context.Context, name string) *holdfast.Lock
	}{
		{"reentrant", holdfast.LayoutHoldfast, "renew", func(c *holdfast.Client, ctx context.Context, name string) *holdfast.Lock {
			return c.Lock(ctx, name)
		}},
		{"fair", holdfast.LayoutHoldfast, "fair_renew", func(c *holdfast.Client, ctx context.Context, name string) *holdfast.Lock {
			return c.FairLock(ctx, name)
		}},
		{"read", holdfast.LayoutHoldfast, "rw_renew", func(c *holdfast.Client, ctx context.Context, name string) *holdfast.Lock {
			return c.ReadLock(ctx, name)
		}},
		{"write", holdfast.LayoutHoldfast, "rw_renew", func(c *holdfast.Client, ctx context.Context, name string) *holdfast.Lock {
			return c.WriteLock(ctx, name)
		}},
		{"semaphore", holdfast.LayoutHoldfast, "sem_renew", func(c *holdfast.Client, ctx context.Context, name string) *holdfast.Lock {
			return c.Semaphore(ctx, name, 2)
		}},
		{"election", holdfast.LayoutHoldfast, "elect_renew", func(c *holdfast.Client, ctx context.Context, name string) *holdfast.Lock {
			return c.Elect(ctx, name, "leader-value")
		}},
		{"redisson-lock", holdfast.LayoutRedisson, "redisson_renew", func(c *holdfast.Client, ctx context.Context, name string) *holdfast.Lock {
			return c.Lock(ctx, name)
		}},
		{"redisson-read", holdfast.LayoutRedisson, "redisson_rw_renew", func(c *holdfast.Client, ctx context.Context, name string) *holdfast.Lock {
			return c.ReadLock(ctx, name)
		}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			defer mp.Shutdown(context.Background())
			c := newClient(t, srv, holdfast.Config{MeterProvider: mp, WatchdogTimeout: lease, ClientID: "kinds", Layout: tc.layout})
			ctx := holdfast.WithOwner(context.Background(), "a")
			l := tc.lock(c, ctx, "renewals-"+tc.kind)
			mustAcquire(t, l)
			time.Sleep(2 * lease)
			select {
			case <-l.Lost:
				t.Fatalf("hold lost while renewed: %v", l.Err())
			default:
			}
			m := metrics(t, reader)
			if m["holdfast.renewals{result=ok}"] < 1 {
				t.Errorf("holdfast.renewals{result=ok} = %v after two leases, want > 0", m["holdfast.renewals{result=ok}"])
			}
			if k := "holdfast.redis.duration{result=ok,script=" + tc.script + "}#count"; m[k] < 1 {
				t.Errorf("%s = %v, want > 0", k, m[k])
			}
			if t.Failed() {
				t.Logf("collected: %v", m)
			}
			if err := l.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRenewFailedLogsFairHold: a fair lock's renewal that fails (Redis
// paused past the call's timeout) logs, at Warn, the hold it could not
// renew: its name, owner field and fencing token.
func TestRenewFailedLogsFairHold(t *testing.T) {
	srv := redistest.Start(t)
	logs := &records{}
	c := newClient(t, srv, holdfast.Config{
		Logger:          slog.New(logs),
		WatchdogTimeout: 3 * time.Second, // renewals every second
		CallTimeout:     300 * time.Millisecond,
		ClientID:        "fairlog",
	})
	ctx := holdfast.WithOwner(context.Background(), "a")
	l := c.FairLock(ctx, "fair-renew-log")
	mustAcquire(t, l)
	info, err := c.Inspect(context.Background(), "fair-renew-log")
	if err != nil || len(info.Holders) != 1 {
		t.Fatalf("Inspect = %+v, %v; want one holder", info, err)
	}
	srv.Freeze()
	eventually(t, "a failed fair renewal logged", func() bool {
		_, ok := logs.findAttr(slog.LevelWarn, "Redis call failed", "script", "fair_renew")
		return ok
	})
	srv.Thaw()
	a, _ := logs.findAttr(slog.LevelWarn, "Redis call failed", "script", "fair_renew")
	if a["name"] != "fair-renew-log" || a["owner"] != info.Holders[0].Owner || a["token"] != strconv.FormatUint(l.Token(), 10) {
		t.Errorf("failed renewal logged %v, want name fair-renew-log, owner %s, token %d", a, info.Holders[0].Owner, l.Token())
	}
}
