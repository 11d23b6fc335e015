package holdfast_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"

	"github.com/holdfast/holdfast"
)

// electionRedis starts an embedded Redis (miniredis) for the election
// examples, so that they run anywhere; in a program the URL names your
// deployment.
func electionRedis() (url string, stop func()) {
	mr := miniredis.NewMiniRedis()
	mr.ClockTTL(true)
	if err := mr.Start(); err != nil {
		panic(err)
	}
	// Talk to miniredis as to a standalone server (it would answer
	// CLUSTER SLOTS as a one-node cluster without sharded pub/sub).
	mr.Server().SetPreHook(func(c *server.Peer, cmd string, _ ...string) bool {
		if cmd == "CLUSTER" {
			c.WriteError("ERR This instance has cluster support disabled")
			return true
		}
		return false
	})
	return "redis://" + mr.Addr(), mr.Close
}

// Elect makes one instance the leader: it announces a value (its address)
// and gets a term, a fencing token that every later leader's exceeds.
// Lost closes when leadership ends; Release resigns.
func ExampleClient_Elect() {
	url, stop := electionRedis() // in a program: your deployment's URL
	defer stop()
	c, err := holdfast.Open(url, holdfast.Config{})
	if err != nil {
		fmt.Println("no Redis:", err)
		return
	}
	defer c.Close()
	ctx := context.Background()

	l := c.Elect(ctx, "scheduler", "10.0.0.7:8080")
	if err := l.Wait(ctx); err != nil {
		fmt.Println("not leading:", err)
		return
	}
	fmt.Println("leading in term", l.Token())
	leader, _ := c.Leader(ctx, "scheduler")
	fmt.Printf("the leader is %s (term %d)\n", leader.Value, leader.Term)
	// Lead until l.Lost closes; fence every write with l.Token().
	fmt.Println("resign:", l.Release(ctx))
	// Output:
	// leading in term 1
	// the leader is 10.0.0.7:8080 (term 1)
	// resign: <nil>
}

// Observe follows an election from another process: the current state
// first, then every new leader, and Leader{} while nobody leads.
func ExampleClient_Observe() {
	url, stop := electionRedis()
	defer stop()
	leaderA, errA := holdfast.Open(url, holdfast.Config{})
	leaderB, errB := holdfast.Open(url, holdfast.Config{})
	watcher, errW := holdfast.Open(url, holdfast.Config{})
	if errA != nil || errB != nil || errW != nil {
		fmt.Println("no Redis")
		return
	}
	defer leaderA.Close()
	defer leaderB.Close()
	defer watcher.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // ends the observation and closes its channel

	show := func(st holdfast.Leader) {
		if st.Term == 0 {
			fmt.Println("nobody leads")
			return
		}
		fmt.Printf("%s leads, term %d\n", st.Value, st.Term)
	}
	states := watcher.Observe(ctx, "scheduler")
	show(<-states) // the state at subscription

	a := leaderA.Elect(ctx, "scheduler", "host-a")
	a.Wait(ctx)
	show(<-states)
	a.Release(ctx)
	show(<-states)
	b := leaderB.Elect(ctx, "scheduler", "host-b")
	b.Wait(ctx)
	show(<-states)
	b.Release(ctx)
	// Output:
	// nobody leads
	// host-a leads, term 1
	// nobody leads
	// host-b leads, term 2
}
