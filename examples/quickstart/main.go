// Command quickstart takes a lock on your Redis, works under it and releases
// it. Run two at once and the second waits for the first.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/holdfast/holdfast"
)

func main() {
	url := os.Getenv("REDIS_URL") // e.g. redis://user:password@host:6379
	if url == "" {
		url = "redis://127.0.0.1:6379"
	}
	if err := run(context.Background(), url); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, url string) error {
	c, err := holdfast.Open(url, holdfast.Config{})
	if err != nil {
		return err
	}
	defer c.Close() // releases what is still held, closes the connection

	// ctx bounds the whole life of the hold: when it ends, the lock is
	// released. Bound the wait with WithWait, not with context.WithTimeout.
	l := c.Lock(ctx, "orders:42", holdfast.WithWait(10*time.Second))
	if err := l.Wait(ctx); err != nil {
		return fmt.Errorf("lock orders:42: %w", err) // ErrWaitTimeout after 10s
	}
	log.Printf("holding orders:42, fencing token %d", l.Token())

	work := time.After(2 * time.Second) // your work: writes that carry l.Token()
	select {
	case <-work:
	case <-l.Lost: // the hold ended under us: stop touching the resource
		return fmt.Errorf("lost orders:42: %w", l.Err())
	}
	if err := l.Release(ctx); err != nil {
		return fmt.Errorf("release orders:42: %w", err)
	}
	log.Print("done, released")
	return nil
}
