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

// A fair lock grants in the order of asking, across processes: waiters
// queue in Redis and cannot be overtaken.
func ExampleClient_FairLock() {
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

	first := c.FairLock(ctx, "printer")
	if err := first.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	second := c.FairLock(ctx, "printer")
	select {
	case <-second.Acquired:
		fmt.Println("second granted while the first holds")
	case <-time.After(50 * time.Millisecond):
		fmt.Println("second waits in the queue")
	}
	if err := first.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}
	if err := second.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("second granted after the release, token above the first:", second.Token() > first.Token())
	if err := second.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}

	// The name is a fair lock while held or queued: Lock refuses it.
	third := c.FairLock(ctx, "printer")
	if err := third.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	plain := c.Lock(ctx, "printer")
	fmt.Println("Lock on a fair lock's name:", errors.Is(plain.Wait(ctx), holdfast.ErrWrongKind))
	if err := third.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}
	if err := c.Close(); err != nil {
		fmt.Println("close:", err)
	}
	// Output:
	// second waits in the queue
	// second granted after the release, token above the first: true
	// Lock on a fair lock's name: true
}

// Readers share a read-write lock; a writer waits until they are gone and
// then holds it alone.
func ExampleClient_ReadLock() {
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

	r1 := c.ReadLock(ctx, "catalog")
	r2 := c.ReadLock(ctx, "catalog")
	if err := errors.Join(r1.Wait(ctx), r2.Wait(ctx)); err != nil {
		log.Fatal(err)
	}
	fmt.Println("two readers hold it")

	w := c.WriteLock(ctx, "catalog")
	select {
	case <-w.Acquired:
		fmt.Println("writer granted beside readers")
	case <-time.After(50 * time.Millisecond):
		fmt.Println("writer waits for the readers")
	}
	if err := errors.Join(r1.Release(ctx), r2.Release(ctx)); err != nil {
		fmt.Println("release:", err)
	}
	if err := w.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("writer holds it alone")
	if err := w.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}
	if err := c.Close(); err != nil {
		fmt.Println("close:", err)
	}
	// Output:
	// two readers hold it
	// writer waits for the readers
	// writer holds it alone
}

// A writer holds a read-write lock alone: it waits for the readers that
// hold, and readers wait for it. (Readers that ask while a writer waits
// queue behind it, so a stream of readers cannot starve a writer.) Here two
// processes share the name: one reads, one imports.
func ExampleClient_WriteLock() {
	url, stop, err := holdfasttest.Embedded() // in a program: your Redis's URL
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	reports, err := holdfast.Open(url, holdfast.Config{ClientID: "reports"})
	if err != nil {
		log.Fatal(err)
	}
	importer, err := holdfast.Open(url, holdfast.Config{ClientID: "importer"})
	if err != nil {
		log.Fatal(err)
	}
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
	if err := r.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	w := importer.WriteLock(ctx, "catalog")
	fmt.Println("writer beside a reader:", granted(w))
	if err := r.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}
	if err := w.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("the writer holds it alone, token", w.Token())

	next := reports.ReadLock(ctx, "catalog")
	fmt.Println("reader beside the writer:", granted(next))
	if err := w.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}
	if err := next.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("then the reader, token", next.Token())
	if err := next.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}
	if err := errors.Join(reports.Close(), importer.Close()); err != nil {
		fmt.Println("close:", err)
	}
	// Output:
	// writer beside a reader: waits
	// the writer holds it alone, token 2
	// reader beside the writer: waits
	// then the reader, token 3
}

// A semaphore lets at most N holders in at once, across every process;
// each permit is leased and renewed like a lock.
func ExampleClient_Semaphore() {
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

	// At most two exports at once, across every process.
	a := c.Semaphore(ctx, "exports", 2)
	b := c.Semaphore(ctx, "exports", 2)
	if err := errors.Join(a.Wait(ctx), b.Wait(ctx)); err != nil {
		log.Fatal(err)
	}
	fmt.Println("two permits held")

	third := c.Semaphore(ctx, "exports", 2, holdfast.WithWait(0))
	fmt.Println("a third is refused:", errors.Is(third.Wait(ctx), holdfast.ErrWaitTimeout))

	if err := b.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}
	again := c.Semaphore(ctx, "exports", 2)
	if err := again.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("a freed permit is taken again")
	if err := errors.Join(a.Release(ctx), again.Release(ctx)); err != nil {
		fmt.Println("release:", err)
	}
	if err := c.Close(); err != nil {
		fmt.Println("close:", err)
	}
	// Output:
	// two permits held
	// a third is refused: true
	// a freed permit is taken again
}
