package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast"
)

// New takes a rueidis client you configured yourself (Sentinel, Cluster,
// TLS, your own timeouts); Close leaves it open, since it is yours.
func ExampleNew() {
	url, stop := embeddedRedis() // in a program: your Redis, e.g. 127.0.0.1:6379
	defer stop()
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  []string{strings.TrimPrefix(url, "redis://")},
		DisableCache: true, // holdfast reads nothing twice: no need for client-side caching
	})
	if err != nil {
		fmt.Println("no Redis:", err)
		return
	}
	defer rdb.Close() // after c.Close: the Client does not close what it did not open

	c, err := holdfast.New(holdfast.Config{Redis: rdb, ClientID: "billing"})
	if err != nil {
		fmt.Println("bad config:", err)
		return
	}
	defer c.Close()
	ctx := context.Background()

	l := c.Lock(ctx, "invoices:2026-11")
	if err := l.Wait(ctx); err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	fmt.Println("held by", c.ClientID(), "with token", l.Token())
	fmt.Println("release:", l.Release(ctx))

	_, err = holdfast.New(holdfast.Config{}) // no Redis client: nothing to lock with
	fmt.Println("New without Redis:", errors.Is(err, holdfast.ErrInvalidOption))
	// Output:
	// held by billing with token 1
	// release: <nil>
	// New without Redis: true
}

// LayoutRedisson makes a Client speak Redisson's keys and messages, so that
// Go and Java processes share locks: Lock is Java's RLock (and
// RFencedLock), FairLock its RFairLock, ReadLock/WriteLock its
// RReadWriteLock. Kinds Redisson's keys cannot carry end at once with
// ErrNotSupported.
func ExampleLayout() {
	url, stop := embeddedRedis() // in a program: the Redis your Java services use
	defer stop()
	c, err := holdfast.Open(url, holdfast.Config{Layout: holdfast.LayoutRedisson})
	if err != nil {
		fmt.Println("no Redis:", err)
		return
	}
	defer c.Close()
	ctx := context.Background()

	l := c.Lock(ctx, "orders:42") // Java: redisson.getLock("orders:42") or getFencedLock
	if err := l.Wait(ctx); err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	names, _ := c.Names(ctx, "*")
	fmt.Println("keys are the bare names:", names)
	info, _ := c.Inspect(ctx, "orders:42")
	fmt.Println("kind:", info.Kind, "holders:", len(info.Holders), "token:", l.Token())
	l.Release(ctx)

	leader := c.Elect(ctx, "orders:leader", "me") // Redisson has no election
	<-leader.Lost
	fmt.Println("Elect:", errors.Is(leader.Err(), holdfast.ErrNotSupported))
	// Output:
	// keys are the bare names: [orders:42]
	// kind: lock holders: 1 token: 1
	// Elect: true
}
