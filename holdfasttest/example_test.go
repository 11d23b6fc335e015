package holdfasttest_test

import (
	"context"
	"fmt"
	"log"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/holdfasttest"
)

// Embedded gives a URL to open Clients on, as a Redis server's would, and
// the function that stops the server once the Clients are closed.
func ExampleEmbedded() {
	url, stop, err := holdfasttest.Embedded()
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
		log.Fatal(err)
	}
	fmt.Println("held, token", l.Token())
	fmt.Println("release:", l.Release(ctx))
	if err := c.Close(); err != nil {
		fmt.Println("close:", err)
	}
	// Output:
	// held, token 1
	// release: <nil>
}
