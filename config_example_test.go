package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"slices"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/holdfasttest"
)

// MeterProvider takes any OpenTelemetry MeterProvider: the Client records
// acquisitions by outcome, wait and hold times, renewals, lost holds, the
// Locks held and waiting, and the latency of its Redis calls. Here the
// SDK's, read by hand; in a program, yours, with the exporter you use.
func ExampleConfig_meterProvider() {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() {
		if err := provider.Shutdown(ctx); err != nil {
			fmt.Println("shutdown:", err)
		}
	}()

	url, stop, err := holdfasttest.Embedded() // in a program: your Redis's URL
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	c, err := holdfast.Open(url, holdfast.Config{MeterProvider: provider})
	if err != nil {
		log.Fatal(err)
	}

	l := c.Lock(ctx, "orders:42")
	if err := l.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	busy := c.Lock(ctx, "orders:42", holdfast.WithWait(0))
	fmt.Println("a second try:", busy.Wait(ctx))
	if err := l.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	var lines []string
	for _, scope := range rm.ScopeMetrics {
		for _, m := range scope.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				continue // the histograms of durations
			}
			for _, p := range sum.DataPoints {
				name := m.Name
				if outcome, ok := p.Attributes.Value("outcome"); ok {
					name += "{outcome=" + outcome.Emit() + "}"
				}
				lines = append(lines, fmt.Sprintf("%s %d", name, p.Value))
			}
		}
	}
	slices.Sort(lines)
	for _, line := range lines {
		fmt.Println(line)
	}
	if err := c.Close(); err != nil {
		fmt.Println("close:", err)
	}
	// Output:
	// a second try: holdfast: wait budget spent before the lock was granted
	// holdfast.acquisitions{outcome=granted} 1
	// holdfast.acquisitions{outcome=wait_timeout} 1
	// holdfast.held 0
	// holdfast.waiting 0
}

// SyncReplicas makes every grant and renewal wait until replicas have it,
// so that a failover to one of them keeps the hold. It needs a primary
// with replicas, which the embedded server of the other examples has not:
// this example is compiled, not run.
func ExampleConfig_syncReplicas() {
	// A Sentinel deployment: its primary has replicas to acknowledge.
	url := "redis://10.0.0.7:26379?addr=10.0.0.8:26379&addr=10.0.0.9:26379&master_set=locks"
	c, err := holdfast.Open(url, holdfast.Config{
		SyncReplicas: 1,                      // a grant counts once a replica has it
		SyncTimeout:  200 * time.Millisecond, // how long each call waits for the replica
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	l := c.Lock(ctx, "ledger")
	switch err := l.Wait(ctx); {
	case errors.Is(err, holdfast.ErrReplicaSync):
		// No replica acknowledged in time: the grant was undone, nobody
		// holds the lock. Replication lags or a replica is down.
		fmt.Println("not held, the replicas lag:", err)
	case err != nil:
		fmt.Println("not held:", err)
	default:
		fmt.Println("held on the primary and a replica, token", l.Token())
		if err := l.Release(ctx); err != nil {
			fmt.Println("release:", err)
		}
	}
	if err := c.Close(); err != nil {
		fmt.Println("close:", err)
	}
}
