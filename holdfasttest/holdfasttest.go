// Package holdfasttest runs an embedded Redis inside the process, so that
// examples run anywhere and code that takes a *holdfast.Client can be
// tested without a Redis server. It is what the examples of holdfast run on:
//
//	url, stop, err := holdfasttest.Embedded()
//	if err != nil {
//		return err
//	}
//	defer stop()
//	c, err := holdfast.Open(url, holdfast.Config{})
//
// In a test, NewClient does the same and cleans up when the test ends:
//
//	func TestCharge(t *testing.T) {
//		c := holdfasttest.NewClient(t, holdfast.Config{})
//		if err := charge(context.Background(), c, "orders:42"); err != nil {
//			t.Fatal(err)
//		}
//	}
//
// # Limits
//
// The embedded server is miniredis, an implementation of Redis in Go, not
// Redis: it has no replicas, no cluster, no persistence and no failover, it
// does not answer WAIT (so Config.SyncReplicas cannot be used with it), and
// its timing is not a server's. Use it to check that your code takes,
// fences and releases its locks as meant. For how your code behaves under
// pauses, partitions, failovers and expiries, use the simulator
// ([github.com/holdfast/holdfast/sim], docs/simulation.md); for anything about latency, clusters
// or a deployment's guarantees (docs/guarantees.md), test against a real
// Redis server.
//
// # Compatibility
//
// holdfasttest is supported API with the same promise as the root
// package. Only its behaviour as a Redis that holdfast can lock on is
// promised, not the embedded implementation behind it.
package holdfasttest

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"

	"github.com/holdfast/holdfast"
)

// Embedded starts an embedded Redis on a free loopback port and returns its
// URL, for holdfast.Open, and the function that stops it. stop closes
// every connection to the server: close the Clients that use it first. Each
// call starts a server of its own, empty.
func Embedded() (url string, stop func(), err error) {
	mr := miniredis.NewMiniRedis()
	// Keys expire on the clock, as on a real server: without this,
	// miniredis's TTLs only run when a test moves them forward.
	mr.ClockTTL(true)
	if err := mr.Start(); err != nil {
		return "", nil, err
	}
	mr.Server().SetPreHook(asStandalone)
	return "redis://" + mr.Addr(), mr.Close, nil
}

// asStandalone makes miniredis answer as a standalone Redis 7 server on the
// two points where a client would otherwise take a path miniredis cannot
// serve. It returns true for a command it answered itself.
func asStandalone(c *server.Peer, cmd string, _ ...string) bool {
	switch cmd {
	case "CLUSTER":
		// miniredis answers CLUSTER SLOTS as a one-node cluster, but has no
		// sharded pub/sub for a cluster's wake-ups.
		c.WriteError("ERR This instance has cluster support disabled")
		return true
	case "HELLO":
		// Over RESP3 a client's subscriptions share the connection of its
		// commands, which Redis allows and miniredis does not: it refuses
		// every script on a subscribed connection. Refused HELLO, clients
		// speak RESP2, which keeps subscriptions on a connection of their
		// own.
		c.WriteError("ERR unknown command 'HELLO'")
		return true
	}
	return false
}

// NewClient starts an embedded Redis (see Embedded) and returns a Client
// opened on it with cfg. When the test ends, the Client is closed, then the
// server stopped; a Close error fails the test. A server that does not start
// or a cfg that Open refuses fails the test at once.
func NewClient(tb testing.TB, cfg holdfast.Config) *holdfast.Client {
	tb.Helper()
	url, stop, err := Embedded()
	if err != nil {
		tb.Fatalf("holdfasttest: starting the embedded Redis: %v", err)
	}
	tb.Cleanup(stop)
	c, err := holdfast.Open(url, cfg)
	if err != nil {
		tb.Fatalf("holdfasttest: opening a Client: %v", err)
	}
	// Cleanups run last added first: the Client closes before the server.
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("holdfasttest: closing the Client: %v", err)
		}
	})
	return c
}
