package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/holdfasttest"
)

// Elect makes one instance the leader: it announces a value (its address)
// and gets a term, a fencing token that every later leader's exceeds.
// Lost closes when leadership ends; Release resigns.
func ExampleClient_Elect() {
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

	l := c.Elect(ctx, "scheduler", "10.0.0.7:8080")
	if err := l.Wait(ctx); err != nil {
		log.Fatal("not leading: ", err)
	}
	fmt.Println("leading in term", l.Token())
	// Lead until l.Lost closes; fence every write with l.Token().
	fmt.Println("resign:", l.Release(ctx))
	if err := c.Close(); err != nil {
		fmt.Println("close:", err)
	}
	// Output:
	// leading in term 1
	// resign: <nil>
}

// Leader reads who leads now, from any process: to send it a request, or to
// check a term. Nobody leads: the zero Leader.
func ExampleClient_Leader() {
	url, stop, err := holdfasttest.Embedded() // in a program: your Redis's URL
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	scheduler, err := holdfast.Open(url, holdfast.Config{})
	if err != nil {
		log.Fatal(err)
	}
	api, err := holdfast.Open(url, holdfast.Config{}) // another process
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	show := func() {
		leader, err := api.Leader(ctx, "scheduler")
		switch {
		case err != nil:
			fmt.Println("cannot tell:", err)
		case leader.Term == 0:
			fmt.Println("nobody leads")
		default:
			fmt.Printf("send to %s (term %d)\n", leader.Value, leader.Term)
		}
	}
	show()
	l := scheduler.Elect(ctx, "scheduler", "10.0.0.7:8080")
	if err := l.Wait(ctx); err != nil {
		log.Fatal("not leading: ", err)
	}
	show()
	if err := l.Release(ctx); err != nil {
		fmt.Println("resign:", err)
	}
	show()
	if err := errors.Join(scheduler.Close(), api.Close()); err != nil {
		fmt.Println("close:", err)
	}
	// Output:
	// nobody leads
	// send to 10.0.0.7:8080 (term 1)
	// nobody leads
}

// Observe follows an election from another process: the current state
// first, then every new leader, and Leader{} while nobody leads.
func ExampleClient_Observe() {
	url, stop, err := holdfasttest.Embedded() // in a program: your Redis's URL
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	var clients []*holdfast.Client // host A, host B and a watcher: three processes
	for range 3 {
		c, err := holdfast.Open(url, holdfast.Config{})
		if err != nil {
			log.Fatal(err)
		}
		clients = append(clients, c)
	}
	hostA, hostB, watcher := clients[0], clients[1], clients[2]
	ctx, cancel := context.WithCancel(context.Background())

	show := func(st holdfast.Leader) {
		if st.Term == 0 {
			fmt.Println("nobody leads")
			return
		}
		fmt.Printf("%s leads, term %d\n", st.Value, st.Term)
	}
	states := watcher.Observe(ctx, "scheduler")
	show(<-states) // the state at subscription

	a := hostA.Elect(ctx, "scheduler", "host-a")
	if err := a.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	show(<-states)
	if err := a.Release(ctx); err != nil {
		fmt.Println("resign:", err)
	}
	show(<-states)
	b := hostB.Elect(ctx, "scheduler", "host-b")
	if err := b.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	show(<-states)
	if err := b.Release(ctx); err != nil {
		fmt.Println("resign:", err)
	}

	cancel() // ends the observation: its channel closes
	for range states {
	}
	for _, c := range clients {
		if err := c.Close(); err != nil {
			fmt.Println("close:", err)
		}
	}
	// Output:
	// nobody leads
	// host-a leads, term 1
	// nobody leads
	// host-b leads, term 2
}
