package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"

	"github.com/holdfast/holdfast"
)

// embeddedRedis starts an embedded Redis (miniredis) on a loopback port, so
// that the examples run anywhere, and returns its URL and the function that
// stops it. In a program, the URL names your deployment (see Open).
func embeddedRedis() (url string, stop func()) {
	mr := miniredis.NewMiniRedis()
	mr.ClockTTL(true) // TTLs run on the clock, as on a real server
	if err := mr.Start(); err != nil {
		panic(err)
	}
	// miniredis answers CLUSTER SLOTS as a one-node cluster, but has no
	// sharded pub/sub for a cluster's wake-ups: it answers as a standalone
	// server does instead, so that clients talk to it as to one.
	mr.Server().SetPreHook(func(c *server.Peer, cmd string, _ ...string) bool {
		if cmd == "CLUSTER" {
			c.WriteError("ERR This instance has cluster support disabled")
			return true
		}
		// Over RESP3 a client's subscriptions ride the connection that
		// carries its commands, which Redis allows and miniredis does not
		// (it refuses every script on a subscribed connection, and the
		// lock calls wait out retries: an example took up to 24 s). Refused
		// HELLO, clients speak RESP2, which keeps subscriptions apart.
		if cmd == "HELLO" {
			c.WriteError("ERR unknown command 'HELLO'")
			return true
		}
		return false
	})
	return "redis://" + mr.Addr(), mr.Close
}

// exampleClient returns a Client on an embedded Redis and the function that
// closes it all.
func exampleClient() (*holdfast.Client, func()) {
	url, stop := embeddedRedis()
	c, err := holdfast.Open(url, holdfast.Config{})
	if err != nil {
		panic(err)
	}
	return c, func() {
		c.Close()
		stop()
	}
}

// Open dials Redis from a URL; Lock returns at once; Wait blocks until the
// lock is held, Release gives it back and tells whether Redis confirmed it.
func Example() {
	url, stop := embeddedRedis() // in a program: "redis://127.0.0.1:6379", or your deployment's URL (see Open)
	defer stop()
	c, err := holdfast.Open(url, holdfast.Config{})
	if err != nil {
		fmt.Println("no Redis:", err)
		return
	}
	defer c.Close() // closes the Redis client Open dialled too
	ctx := context.Background()

	l := c.Lock(ctx, "orders:42")
	if err := l.Wait(ctx); err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	fmt.Println("held, fencing token", l.Token())
	fmt.Println("release:", l.Release(ctx))
	fmt.Println("ended with ErrReleased:", errors.Is(l.Err(), holdfast.ErrReleased))
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

	url, stop := embeddedRedis()
	defer stop()
	c, err := holdfast.Open(url, holdfast.Config{ClientID: "billing"})
	if err != nil {
		fmt.Println("no Redis:", err)
		return
	}
	defer c.Close()
	fmt.Println("client", c.ClientID())
	// Output:
	// holdfast: invalid option: Open: redis://billing:xxxxx@10.0.0.7:6379/x/y: invalid URL path: /x/y
	// a bad option: true
	// client billing
}

// The channel API: select on Acquired and Lost to wait, then keep an eye on
// Lost while working — it closes if the hold is lost, before Redis can give
// the lock to anyone else.
func Example_selectLoop() {
	c, done := exampleClient()
	defer done()
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
	defer l.Release(ctx)
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
	c, done := exampleClient()
	defer done()
	ctx := context.Background()

	holder := c.Lock(ctx, "report")
	holder.Wait(ctx)
	defer holder.Release(ctx)

	try := c.Lock(ctx, "report", holdfast.WithWait(0))
	<-try.Lost
	fmt.Println("try once:", errors.Is(try.Err(), holdfast.ErrWaitTimeout))

	patient := c.Lock(ctx, "report", holdfast.WithWait(100*time.Millisecond))
	<-patient.Lost
	fmt.Println("after 100ms:", patient.Err())
	// Output:
	// try once: true
	// after 100ms: holdfast: wait budget spent before the lock was granted
}

// WithLease holds for a fixed time with no watchdog: Lost closes at the
// validity deadline, a little before Redis expires the key.
func ExampleWithLease() {
	c, done := exampleClient()
	defer done()
	ctx := context.Background()

	l := c.Lock(ctx, "nightly-job", holdfast.WithLease(100*time.Millisecond))
	l.Wait(ctx)
	granted := time.Now()
	fmt.Println("deadline within the lease:", l.Deadline().Before(granted.Add(100*time.Millisecond)))
	<-l.Lost
	fmt.Println("lost:", l.Err())
	// Output:
	// deadline within the lease: true
	// lost: holdfast: lease expired before it could be renewed
}

// fencedStore keeps the highest token it has seen and refuses writes
// carrying a lower one: a holder that was paused past its lease cannot
// overwrite the work of the next holder.
type fencedStore struct {
	highest uint64
	value   string
}

func (s *fencedStore) write(token uint64, v string) error {
	if token < s.highest {
		return fmt.Errorf("stale token %d (seen %d)", token, s.highest)
	}
	s.highest, s.value = token, v
	return nil
}

// Every grant carries a fencing token, strictly increasing per lock name;
// give it to the resource you protect.
func ExampleLock_Token() {
	c, done := exampleClient()
	defer done()
	ctx := context.Background()
	store := &fencedStore{}

	first := c.Lock(ctx, "ledger")
	first.Wait(ctx)
	firstToken := first.Token()
	first.Release(ctx)

	second := c.Lock(ctx, "ledger")
	second.Wait(ctx)
	fmt.Println("second holder writes:", store.write(second.Token(), "new"))
	second.Release(ctx)

	// The first holder, paused all this time, wakes up and writes late.
	fmt.Println("first holder writes:", store.write(firstToken, "old"))
	fmt.Println("value:", store.value)
	// Output:
	// second holder writes: <nil>
	// first holder writes: stale token 1 (seen 2)
	// value: new
}

// Locks of one owner on one name nest: the inner one is granted while the
// outer holds, shares its token, and each needs its own Release.
func ExampleWithOwner() {
	c, done := exampleClient()
	defer done()
	ctx := holdfast.WithOwner(context.Background(), "job-7")

	outer := c.Lock(ctx, "cart:9")
	outer.Wait(ctx)
	inner := c.Lock(ctx, "cart:9")
	inner.Wait(ctx)
	fmt.Println("same token:", inner.Token() == outer.Token())
	inner.Release(ctx)
	fmt.Println("outer still held:", outer.Err() == nil)
	outer.Release(ctx)
	// Output:
	// same token: true
	// outer still held: true
}

// A fair lock grants in the order of asking, across processes: waiters
// queue in Redis and cannot be overtaken.
func ExampleClient_FairLock() {
	c, done := exampleClient()
	defer done()
	ctx := context.Background()

	first := c.FairLock(ctx, "printer")
	first.Wait(ctx)
	second := c.FairLock(ctx, "printer")
	select {
	case <-second.Acquired:
		fmt.Println("second granted while the first holds")
	case <-time.After(50 * time.Millisecond):
		fmt.Println("second waits in the queue")
	}
	first.Release(ctx)
	second.Wait(ctx)
	fmt.Println("second granted after the release, token above the first:", second.Token() > first.Token())
	second.Release(ctx)

	// The name is a fair lock while held or queued: Lock refuses it.
	third := c.FairLock(ctx, "printer")
	third.Wait(ctx)
	plain := c.Lock(ctx, "printer")
	<-plain.Lost
	fmt.Println("Lock on a fair lock's name:", errors.Is(plain.Err(), holdfast.ErrWrongKind))
	third.Release(ctx)
	// Output:
	// second waits in the queue
	// second granted after the release, token above the first: true
	// Lock on a fair lock's name: true
}

// Readers share a read-write lock; a writer waits until they are gone and
// then holds it alone.
func ExampleClient_ReadLock() {
	c, done := exampleClient()
	defer done()
	ctx := context.Background()

	r1 := c.ReadLock(ctx, "catalog")
	r2 := c.ReadLock(ctx, "catalog")
	r1.Wait(ctx)
	r2.Wait(ctx)
	fmt.Println("two readers hold it")

	w := c.WriteLock(ctx, "catalog")
	select {
	case <-w.Acquired:
		fmt.Println("writer granted beside readers")
	case <-time.After(50 * time.Millisecond):
		fmt.Println("writer waits for the readers")
	}
	r1.Release(ctx)
	r2.Release(ctx)
	w.Wait(ctx)
	fmt.Println("writer holds it alone")
	w.Release(ctx)
	// Output:
	// two readers hold it
	// writer waits for the readers
	// writer holds it alone
}

func ExampleClient_Semaphore() {
	c, done := exampleClient()
	defer done()
	ctx := context.Background()

	// At most two exports at once, across every process.
	a := c.Semaphore(ctx, "exports", 2)
	b := c.Semaphore(ctx, "exports", 2)
	a.Wait(ctx)
	b.Wait(ctx)
	fmt.Println("two permits held")

	third := c.Semaphore(ctx, "exports", 2, holdfast.WithWait(0))
	<-third.Lost
	fmt.Println("a third is refused:", errors.Is(third.Err(), holdfast.ErrWaitTimeout))

	b.Release(ctx)
	again := c.Semaphore(ctx, "exports", 2)
	again.Wait(ctx)
	fmt.Println("a freed permit is taken again")
	a.Release(ctx)
	again.Release(ctx)
	// Output:
	// two permits held
	// a third is refused: true
	// a freed permit is taken again
}
