package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/holdfasttest"
)

// LockAll takes several names, on one deployment or several, all or
// nothing: it never shows a partial hold, and calls over overlapping names
// never deadlock whatever the order of their targets.
func ExampleLockAll() {
	// Two embedded servers; in a program: two deployments, e.g. two shards
	// of your data.
	url1, stop1, err := holdfasttest.Embedded()
	if err != nil {
		log.Fatal(err)
	}
	defer stop1()
	url2, stop2, err := holdfasttest.Embedded()
	if err != nil {
		log.Fatal(err)
	}
	defer stop2()
	a, err := holdfast.Open(url1, holdfast.Config{})
	if err != nil {
		log.Fatal(err)
	}
	b, err := holdfast.Open(url2, holdfast.Config{})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	// A transfer between two accounts stored on different deployments.
	accounts := []holdfast.Target{{Client: a, Name: "acct:1"}, {Client: b, Name: "acct:2"}}
	transfer := holdfast.LockAll(ctx, accounts)
	if err := transfer.Wait(ctx); err != nil {
		log.Fatal("not acquired: ", err)
	}
	fmt.Println("both held, tokens", transfer.Tokens())

	// Anyone else is kept out of each part, as by a plain Lock.
	audit := b.Lock(ctx, "acct:2", holdfast.WithWait(0))
	fmt.Println("acct:2 alone:", audit.Wait(ctx))
	if err := transfer.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}

	// While acct:2 is held, a LockAll that includes it takes nothing at all.
	holder := b.Lock(ctx, "acct:2")
	if err := holder.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	other := holdfast.LockAll(ctx, accounts, holdfast.WithWait(100*time.Millisecond))
	err = other.Wait(ctx)
	info, ierr := a.Inspect(ctx, "acct:1")
	if ierr != nil {
		log.Fatal(ierr)
	}
	fmt.Println("gave up:", errors.Is(err, holdfast.ErrWaitTimeout), "- acct:1 left free:", info.Kind == "")
	if err := holder.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}
	if err := errors.Join(a.Close(), b.Close()); err != nil {
		fmt.Println("close:", err)
	}
	// Output:
	// both held, tokens [1 1]
	// acct:2 alone: holdfast: wait budget spent before the lock was granted
	// gave up: true - acct:1 left free: true
}

// RedLock holds a name on a majority of independent Redis deployments, so
// that the loss of a minority of them neither ends the hold nor lets a
// second holder in; its token stays monotone across the nodes.
func ExampleRedLock() {
	var clients []*holdfast.Client
	for range 3 {
		url, stop, err := holdfasttest.Embedded() // in a program: three independent masters
		if err != nil {
			log.Fatal(err)
		}
		defer stop()
		c, err := holdfast.Open(url, holdfast.Config{})
		if err != nil {
			log.Fatal(err)
		}
		clients = append(clients, c)
	}
	ctx := context.Background()

	l := holdfast.RedLock(ctx, clients, "ledger")
	if err := l.Wait(ctx); err != nil {
		log.Fatal("not acquired: ", err)
	}
	fmt.Println("held on a majority, token", l.Token())

	rival := holdfast.RedLock(ctx, clients, "ledger", holdfast.WithWait(0)) // one round, one try per node
	fmt.Println("rival:", errors.Is(rival.Wait(ctx), holdfast.ErrNoQuorum))

	if err := l.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}
	next := holdfast.RedLock(ctx, clients, "ledger")
	if err := next.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("next holder's token is higher:", next.Token() > l.Token())
	if err := next.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}
	for _, c := range clients {
		if err := c.Close(); err != nil {
			fmt.Println("close:", err)
		}
	}
	// Output:
	// held on a majority, token 1
	// rival: true
	// next holder's token is higher: true
}
