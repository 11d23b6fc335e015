package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/holdfast/holdfast"
)

// Inspect shows what Redis holds for a name — kind, holders, TTL, fence —
// without changing anything; `holdfast status NAME` prints the same.
func ExampleClient_Inspect() {
	url, stop := embeddedRedis() // in a program: "redis://127.0.0.1:6379"
	defer stop()
	c, err := holdfast.Open(url, holdfast.Config{ClientID: "billing"})
	if err != nil {
		fmt.Println("no Redis:", err)
		return
	}
	defer c.Close()
	ctx := holdfast.WithOwner(context.Background(), "job-7")

	l := c.Lock(ctx, "orders:42")
	l.Wait(ctx)
	again := c.Lock(ctx, "orders:42") // the same owner: a reentry
	again.Wait(ctx)

	info, err := c.Inspect(ctx, "orders:42")
	if err != nil {
		fmt.Println("inspect:", err)
		return
	}
	h := info.Holders[0]
	owner := strings.SplitN(h.Owner, ":", 3) // CLIENTID:INSTANCE:OWNER; INSTANCE is random per Client
	fmt.Println("kind:", info.Kind)
	fmt.Println("holder:", owner[0], owner[2], "reentries:", h.Count)
	fmt.Println("TTL within the watchdog's 30s:", info.TTL > 0 && info.TTL <= 30*time.Second)
	fmt.Println("fence:", info.Fence)
	again.Release(ctx)
	l.Release(ctx)

	info, _ = c.Inspect(ctx, "orders:42")
	fmt.Printf("after release: kind %q, %d holders, fence %d\n", info.Kind, len(info.Holders), info.Fence)
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
	url, stop := embeddedRedis() // in a program: "redis://127.0.0.1:6379"
	defer stop()
	// A short watchdog, so that the stuck holder's next renewal comes soon.
	stuck, err := holdfast.Open(url, holdfast.Config{WatchdogTimeout: 300 * time.Millisecond})
	if err != nil {
		fmt.Println("no Redis:", err)
		return
	}
	defer stuck.Close()
	next, err := holdfast.Open(url, holdfast.Config{})
	if err != nil {
		fmt.Println("no Redis:", err)
		return
	}
	defer next.Close()
	ctx := context.Background()

	held := stuck.Lock(ctx, "migration")
	held.Wait(ctx)
	waiter := next.Lock(ctx, "migration")

	// The operator's own process (or `holdfast force-unlock migration`).
	operator, err := holdfast.Open(url, holdfast.Config{})
	if err != nil {
		fmt.Println("no Redis:", err)
		return
	}
	defer operator.Close()
	if err := operator.ForceUnlock(ctx, "migration"); err != nil {
		fmt.Println("force-unlock:", err)
		return
	}
	waiter.Wait(ctx)
	fmt.Println("the waiter holds it, token", waiter.Token(), "after", held.Token())
	<-held.Lost
	fmt.Println("the old holder is told:", errors.Is(held.Err(), holdfast.ErrNotOwner))
	waiter.Release(ctx)
	// Output:
	// the waiter holds it, token 3 after 1
	// the old holder is told: true
}
