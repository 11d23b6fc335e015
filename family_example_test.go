package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holdfast/holdfast"
)

// A writer holds a read-write lock alone: it waits for the readers that
// hold, and readers wait for it. (Readers that ask while a writer waits
// queue behind it, so a stream of readers cannot starve a writer.) Here two
// processes share the name: one reads, one imports.
func ExampleClient_WriteLock() {
	url, stop := embeddedRedis() // in a program: "redis://127.0.0.1:6379"
	defer stop()
	reports, err := holdfast.Open(url, holdfast.Config{ClientID: "reports"})
	if err != nil {
		fmt.Println("no Redis:", err)
		return
	}
	defer reports.Close()
	importer, err := holdfast.Open(url, holdfast.Config{ClientID: "importer"})
	if err != nil {
		fmt.Println("no Redis:", err)
		return
	}
	defer importer.Close()
	ctx := context.Background()

	// granted tells whether l is granted within 100ms.
	granted := func(l *holdfast.Lock) string {
		select {
		case <-l.Acquired:
			return "granted at once"
		case <-time.After(100 * time.Millisecond):
			return "waits"
		}
	}

	r := reports.ReadLock(ctx, "catalog")
	r.Wait(ctx)
	w := importer.WriteLock(ctx, "catalog")
	fmt.Println("writer beside a reader:", granted(w))
	r.Release(ctx)
	w.Wait(ctx)
	fmt.Println("the writer holds it alone, token", w.Token())

	next := reports.ReadLock(ctx, "catalog")
	fmt.Println("reader beside the writer:", granted(next))
	w.Release(ctx)
	next.Wait(ctx)
	fmt.Println("then the reader, token", next.Token())
	next.Release(ctx)
	// Output:
	// writer beside a reader: waits
	// the writer holds it alone, token 2
	// reader beside the writer: waits
	// then the reader, token 3
}

// LockAll takes several names, on one deployment or several, all or
// nothing: it never shows a partial hold, and calls over overlapping names
// never deadlock whatever the order of their targets.
func ExampleLockAll() {
	url1, stop1 := embeddedRedis() // in a program: two deployments, e.g. two shards of your data
	defer stop1()
	url2, stop2 := embeddedRedis()
	defer stop2()
	a, err := holdfast.Open(url1, holdfast.Config{})
	if err != nil {
		fmt.Println("no Redis:", err)
		return
	}
	defer a.Close()
	b, err := holdfast.Open(url2, holdfast.Config{})
	if err != nil {
		fmt.Println("no Redis:", err)
		return
	}
	defer b.Close()
	ctx := context.Background()

	// A transfer between two accounts stored on different deployments.
	transfer := holdfast.LockAll(ctx, []holdfast.Target{{Client: a, Name: "acct:1"}, {Client: b, Name: "acct:2"}})
	if err := transfer.Wait(ctx); err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	fmt.Println("both held, tokens", transfer.Tokens())

	// Anyone else is kept out of each part, as by a plain Lock.
	audit := b.Lock(ctx, "acct:2", holdfast.WithWait(0))
	<-audit.Lost
	fmt.Println("acct:2 alone:", audit.Err())

	// While acct:2 is held, a LockAll that includes it takes nothing at all.
	transfer.Release(ctx)
	holder := b.Lock(ctx, "acct:2")
	holder.Wait(ctx)
	other := holdfast.LockAll(ctx, []holdfast.Target{{Client: a, Name: "acct:1"}, {Client: b, Name: "acct:2"}},
		holdfast.WithWait(100*time.Millisecond))
	<-other.Lost
	info, _ := a.Inspect(ctx, "acct:1")
	fmt.Println("gave up:", errors.Is(other.Err(), holdfast.ErrWaitTimeout), "- acct:1 left free:", info.Kind == "")
	holder.Release(ctx)
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
		url, stop := embeddedRedis() // in a program: three independent masters
		defer stop()
		c, err := holdfast.Open(url, holdfast.Config{})
		if err != nil {
			fmt.Println("no Redis:", err)
			return
		}
		defer c.Close()
		clients = append(clients, c)
	}
	ctx := context.Background()

	l := holdfast.RedLock(ctx, clients, "ledger")
	if err := l.Wait(ctx); err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	fmt.Println("held on a majority, token", l.Token())

	rival := holdfast.RedLock(ctx, clients, "ledger", holdfast.WithWait(0)) // one round, one try per node
	<-rival.Lost
	fmt.Println("rival:", errors.Is(rival.Err(), holdfast.ErrNoQuorum))

	l.Release(ctx)
	next := holdfast.RedLock(ctx, clients, "ledger")
	next.Wait(ctx)
	fmt.Println("next holder's token is higher:", next.Token() > l.Token())
	next.Release(ctx)
	// Output:
	// held on a majority, token 1
	// rival: true
	// next holder's token is higher: true
}
