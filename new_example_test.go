package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/holdfasttest"
)

// New takes a rueidis client you configured yourself (Sentinel, Cluster,
// TLS, your own timeouts); Close leaves it open, since it is yours.
func ExampleNew() {
	url, stop, err := holdfasttest.Embedded()
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  []string{strings.TrimPrefix(url, "redis://")}, // in a program: your Redis, e.g. "127.0.0.1:6379"
		DisableCache: true,                                          // holdfast reads nothing twice: no need for client-side caching
	})
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close() // after c.Close: the Client does not close what it did not open

	c, err := holdfast.New(holdfast.Config{Redis: rdb, ClientID: "billing"})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	l := c.Lock(ctx, "invoices:2026-11")
	if err := l.Wait(ctx); err != nil {
		log.Fatal("not acquired: ", err)
	}
	fmt.Println("held by", c.ClientID(), "with token", l.Token())
	fmt.Println("release:", l.Release(ctx))
	if err := c.Close(); err != nil {
		fmt.Println("close:", err)
	}

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
// RReadWriteLock, Semaphore its RPermitExpirableSemaphore. Kinds Redisson
// has no keys for (elections) end at once with ErrNotSupported.
func ExampleLayout() {
	url, stop, err := holdfasttest.Embedded() // in a program: the Redis your Java services use
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	c, err := holdfast.Open(url, holdfast.Config{Layout: holdfast.LayoutRedisson})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	l := c.Lock(ctx, "orders:42") // Java: redisson.getLock("orders:42") or getFencedLock
	if err := l.Wait(ctx); err != nil {
		log.Fatal("not acquired: ", err)
	}
	names, err := c.Names(ctx, "*")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("keys are the bare names:", names)
	info, err := c.Inspect(ctx, "orders:42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("kind:", info.Kind, "holders:", len(info.Holders), "token:", l.Token())
	if err := l.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}

	leader := c.Elect(ctx, "orders:leader", "me") // Redisson has no election
	<-leader.Lost
	fmt.Println("Elect:", errors.Is(leader.Err(), holdfast.ErrNotSupported))
	if err := c.Close(); err != nil {
		fmt.Println("close:", err)
	}
	// Output:
	// keys are the bare names: [orders:42]
	// kind: lock holders: 1 token: 1
	// Elect: true
}
