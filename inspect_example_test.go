package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/holdfasttest"
)

// Inspect shows what Redis holds for a name — kind, holders, TTL, fence —
// without changing anything; `holdfast status NAME` prints the same.
func ExampleClient_Inspect() {
	url, stop, err := holdfasttest.Embedded() // in a program: your Redis's URL
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	c, err := holdfast.Open(url, holdfast.Config{ClientID: "billing"})
	if err != nil {
		log.Fatal(err)
	}
	ctx := holdfast.WithOwner(context.Background(), "job-7")

	l := c.Lock(ctx, "orders:42")
	if err := l.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	again := c.Lock(ctx, "orders:42") // the same owner: a reentry
	if err := again.Wait(ctx); err != nil {
		log.Fatal(err)
	}

	info, err := c.Inspect(ctx, "orders:42")
	if err != nil {
		log.Fatal(err)
	}
	h := info.Holders[0]
	owner := strings.SplitN(h.Owner, ":", 3) // CLIENTID:INSTANCE:OWNER; INSTANCE is random per Client
	fmt.Println("kind:", info.Kind)
	fmt.Println("holder:", owner[0], owner[2], "reentries:", h.Count)
	fmt.Println("TTL within the watchdog's 30s:", info.TTL > 0 && info.TTL <= 30*time.Second)
	fmt.Println("fence:", info.Fence)
	if err := errors.Join(again.Release(ctx), l.Release(ctx)); err != nil {
		fmt.Println("release:", err)
	}

	info, err = c.Inspect(ctx, "orders:42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("after release: kind %q, %d holders, fence %d\n", info.Kind, len(info.Holders), info.Fence)
	if err := c.Close(); err != nil {
		fmt.Println("close:", err)
	}
	// Output:
	// kind: lock
	// holder: billing job-7 reentries: 2
	// TTL within the watchdog's 30s: true
	// fence: 1
	// after release: kind "", 0 holders, fence 1
}

// ForceUnlock frees a name whoever holds it: the operator's last resort for
// a holder that is stuck but alive. Waiters are woken at once and the fence
// is raised, so the old holder's token is stale; the old holder learns at
// its next renewal, through Lost.
func ExampleClient_ForceUnlock() {
	url, stop, err := holdfasttest.Embedded() // in a program: your Redis's URL
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	// A short watchdog, so that the stuck holder's next renewal comes soon.
	stuck, err := holdfast.Open(url, holdfast.Config{WatchdogTimeout: 300 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	next, err := holdfast.Open(url, holdfast.Config{})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	held := stuck.Lock(ctx, "migration")
	if err := held.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	waiter := next.Lock(ctx, "migration")

	// The operator's own process (or `holdfast force-unlock migration`).
	operator, err := holdfast.Open(url, holdfast.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := operator.ForceUnlock(ctx, "migration"); err != nil {
		log.Fatal(err)
	}
	if err := waiter.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("the waiter holds it, token", waiter.Token(), "after", held.Token())
	<-held.Lost
	fmt.Println("the old holder is told:", errors.Is(held.Err(), holdfast.ErrNotOwner))
	if err := waiter.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}
	if err := errors.Join(stuck.Close(), next.Close(), operator.Close()); err != nil {
		fmt.Println("close:", err)
	}
	// Output:
	// the waiter holds it, token 3 after 1
	// the old holder is told: true
}

// Names lists the names held now that match a pattern (Redis glob syntax),
// whatever their kind; `holdfast list` prints the same.
func ExampleClient_Names() {
	url, stop, err := holdfasttest.Embedded() // in a program: your Redis's URL
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	c, err := holdfast.Open(url, holdfast.Config{})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	held := []*holdfast.Lock{
		c.Lock(ctx, "orders:42"),
		c.FairLock(ctx, "orders:7"),
		c.Semaphore(ctx, "exports", 2),
	}
	for _, l := range held {
		if err := l.Wait(ctx); err != nil {
			log.Fatal(err)
		}
	}
	for _, pattern := range []string{"orders:*", "*"} {
		names, err := c.Names(ctx, pattern)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %q\n", pattern, names)
	}

	if err := held[0].Release(ctx); err != nil {
		fmt.Println("release:", err)
	}
	names, err := c.Names(ctx, "orders:*")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("after a release: %q\n", names)
	if err := c.Close(); err != nil { // releases the others
		fmt.Println("close:", err)
	}
	// Output:
	// orders:*: ["orders:42" "orders:7"]
	// *: ["exports" "orders:42" "orders:7"]
	// after a release: ["orders:7"]
}
