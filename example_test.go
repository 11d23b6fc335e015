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

// Every example starts an embedded Redis (package holdfasttest) so that it
// runs anywhere; in a program, the URL is your Redis's (see Open).

// Open dials Redis from a URL; Lock returns at once; Wait blocks until the
// lock is held, Release gives it back and tells whether Redis confirmed it.
func Example() {
	url, stop, err := holdfasttest.Embedded() // in a program: your Redis's URL, e.g. "redis://127.0.0.1:6379"
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	c, err := holdfast.Open(url, holdfast.Config{})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	l := c.Lock(ctx, "orders:42")
	if err := l.Wait(ctx); err != nil {
		log.Fatal("not acquired: ", err)
	}
	fmt.Println("held, fencing token", l.Token())
	fmt.Println("release:", l.Release(ctx))
	fmt.Println("ended with ErrReleased:", errors.Is(l.Err(), holdfast.ErrReleased))

	// Close releases what is still held and closes the Redis client Open
	// dialled.
	if err := c.Close(); err != nil {
		fmt.Println("close:", err)
	}
	// Output:
	// held, fencing token 1
	// release: <nil>
	// ended with ErrReleased: true
}

// Open takes the URLs of the holdfast command: one server, an ACL user,
// TLS, Cluster seeds or Sentinels. A bad URL fails before anything is
// dialled, and no error shows its password.
func ExampleOpen() {
	_, err := holdfast.Open("redis://billing:s3cret@10.0.0.7:6379/x/y", holdfast.Config{})
	fmt.Println(err)
	fmt.Println("a bad option:", errors.Is(err, holdfast.ErrInvalidOption))

	url, stop, err := holdfasttest.Embedded() // in a program: your Redis's URL
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	c, err := holdfast.Open(url, holdfast.Config{ClientID: "billing"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("client", c.ClientID())
	if err := c.Close(); err != nil {
		fmt.Println("close:", err)
	}
	// Output:
	// holdfast: invalid option: Open: redis://billing:xxxxx@10.0.0.7:6379/x/y: invalid URL path: /x/y
	// a bad option: true
	// client billing
}

// The channel API: select on Acquired and Lost to wait, then keep an eye on
// Lost while working — it closes if the hold is lost, before Redis can give
// the lock to anyone else.
func Example_selectLoop() {
	url, stop, err := holdfasttest.Embedded() // in a program: your Redis's URL
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	c, err := holdfast.Open(url, holdfast.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			fmt.Println("close:", err)
		}
	}()
	ctx := context.Background()
	jobs := make(chan string, 3)
	jobs <- "charge"
	jobs <- "ship"
	close(jobs)

	l := c.Lock(ctx, "orders:42")
	select {
	case <-l.Acquired:
	case <-l.Lost:
		fmt.Println("gave up:", l.Err())
		return
	}
	defer func() {
		// After a loss there is nothing to release (ErrNotHeld).
		if err := l.Release(ctx); err != nil && !errors.Is(err, holdfast.ErrNotHeld) {
			fmt.Println("release:", err)
		}
	}()
	for {
		select {
		case <-l.Lost:
			fmt.Println("lost the lock, stopping:", l.Err())
			return
		case job, ok := <-jobs:
			if !ok {
				fmt.Println("all done")
				return
			}
			fmt.Println("doing", job, "under token", l.Token())
		}
	}
	// Output:
	// doing charge under token 1
	// doing ship under token 1
	// all done
}

// WithWait bounds the wait for a held lock; WithWait(0) tries once.
func ExampleWithWait() {
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

	holder := c.Lock(ctx, "report")
	if err := holder.Wait(ctx); err != nil {
		log.Fatal(err)
	}

	try := c.Lock(ctx, "report", holdfast.WithWait(0))
	err = try.Wait(ctx)
	fmt.Println("try once:", errors.Is(err, holdfast.ErrWaitTimeout))

	patient := c.Lock(ctx, "report", holdfast.WithWait(100*time.Millisecond))
	fmt.Println("after 100ms:", patient.Wait(ctx))

	if err := holder.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}
	if err := c.Close(); err != nil {
		fmt.Println("close:", err)
	}
	// Output:
	// try once: true
	// after 100ms: holdfast: wait budget spent before the lock was granted
}

// WithLease holds for a fixed time with no watchdog: Lost closes at the
// validity deadline, a little before Redis expires the key.
func ExampleWithLease() {
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

	l := c.Lock(ctx, "nightly-job", holdfast.WithLease(100*time.Millisecond))
	if err := l.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	granted := time.Now()
	fmt.Println("deadline within the lease:", l.Deadline().Before(granted.Add(100*time.Millisecond)))
	<-l.Lost
	fmt.Println("lost:", l.Err())
	if err := c.Close(); err != nil {
		fmt.Println("close:", err)
	}
	// Output:
	// deadline within the lease: true
	// lost: holdfast: lease expired before it could be renewed
}

// Every grant carries a fencing token, strictly increasing per lock name;
// give it to the resource you protect, which refuses a write carrying a
// lower token than one it has seen: a holder that was paused past its
// lease cannot overwrite the work of the next holder.
func ExampleLock_Token() {
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

	// The protected resource: it keeps the highest token it has seen.
	var highest uint64
	value := ""
	write := func(token uint64, v string) error {
		if token < highest {
			return fmt.Errorf("stale token %d (seen %d)", token, highest)
		}
		highest, value = token, v
		return nil
	}

	first := c.Lock(ctx, "ledger")
	if err := first.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	firstToken := first.Token()
	if err := first.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}

	second := c.Lock(ctx, "ledger")
	if err := second.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("second holder writes:", write(second.Token(), "new"))
	if err := second.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}

	// The first holder, paused all this time, wakes up and writes late.
	fmt.Println("first holder writes:", write(firstToken, "old"))
	fmt.Println("value:", value)
	if err := c.Close(); err != nil {
		fmt.Println("close:", err)
	}
	// Output:
	// second holder writes: <nil>
	// first holder writes: stale token 1 (seen 2)
	// value: new
}

// Before a write that its token guards, a holder checks that the hold
// outlives the write: Deadline is when the hold may end, and a write that
// could finish after it waits for the next grant instead. The token still
// guards the write against a pause that comes after the check.
func ExampleLock_Deadline() {
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

	l := c.Lock(ctx, "ledger", holdfast.WithLease(time.Second))
	if err := l.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	const writeTakes = 200 * time.Millisecond // the longest a write may take
	write := func(what string) {
		if time.Until(l.Deadline()) < writeTakes {
			fmt.Println(what + ": not written, the hold may end before the write")
			return
		}
		select {
		case <-l.Lost: // lost before its deadline: the key was deleted, or taken over
			fmt.Println(what+": not written, the hold is over:", l.Err())
			return
		default:
		}
		fmt.Println(what+": written with token", l.Token())
	}
	write("first")
	time.Sleep(time.Until(l.Deadline()) - writeTakes/2) // a long pause, a slow step
	write("second")

	if err := l.Release(ctx); err != nil && !errors.Is(err, holdfast.ErrNotHeld) {
		fmt.Println("release:", err)
	}
	if err := c.Close(); err != nil {
		fmt.Println("close:", err)
	}
	// Output:
	// first: written with token 1
	// second: not written, the hold may end before the write
}

// Locks of one owner on one name nest: the inner one is granted while the
// outer holds, shares its token, and each needs its own Release.
func ExampleWithOwner() {
	url, stop, err := holdfasttest.Embedded() // in a program: your Redis's URL
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	c, err := holdfast.Open(url, holdfast.Config{})
	if err != nil {
		log.Fatal(err)
	}
	ctx := holdfast.WithOwner(context.Background(), "job-7")

	outer := c.Lock(ctx, "cart:9")
	if err := outer.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	inner := c.Lock(ctx, "cart:9")
	if err := inner.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("same token:", inner.Token() == outer.Token())
	if err := inner.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}
	fmt.Println("outer still held:", outer.Err() == nil)
	if err := outer.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}
	if err := c.Close(); err != nil {
		fmt.Println("close:", err)
	}
	// Output:
	// same token: true
	// outer still held: true
}
