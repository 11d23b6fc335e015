package holdfast_test

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
)

// TestCloseWhileLingersFire closes a Client holding many locks while their
// actors' linger timers fire: the holds were taken together, so their
// lingers are due in the same few wheel ticks, and Close comes at a random
// moment around then. Close releases every hold and must return each time.
//
// An actor busy at Close (its release in flight) whose linger fired — taken
// off the wheel, its letter not yet posted — while the release's reply
// turn tried to passivate it waits for that letter; the letter's turn used
// to give up on an actor that was not quiet, and Close waited for ever.
func TestCloseWhileLingersFire(t *testing.T) {
	const linger = 60 * time.Millisecond
	defer holdfast.SetIdleTimeout(linger)()
	srv := redistest.Start(t)
	const holds, rounds = 2000, 30
	rng := rand.New(rand.NewSource(1))
	for r := range rounds {
		// A lease long enough that a loaded machine (the race detector,
		// other packages' tests) renews every hold in time: what is tested
		// is Close, not the watchdog.
		c, err := holdfast.New(holdfast.Config{Redis: srv.Client(t), WatchdogTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		locks := make([]*holdfast.Lock, holds)
		for i := range locks {
			locks[i] = c.Lock(context.Background(), fmt.Sprintf("r%d-%d", r, i))
		}
		start := time.Now()
		for _, l := range locks {
			mustAcquire(t, l)
		}
		took := time.Since(start)
		// Close somewhere between the first lingers' end and the last's.
		time.Sleep(linger/2 + time.Duration(rng.Int63n(int64(linger+took))))
		closed := make(chan error, 1)
		go func() { closed <- c.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatalf("round %d: Close: %v", r, err)
			}
		case <-time.After(10 * time.Second):
			logGoroutines(t)
			t.Fatalf("round %d: Close of %d holds did not return within 10s (%d actors, %d asleep)", r, holds, c.Actors(), holdfast.Sleeping(c))
		}
		for _, l := range locks {
			mustLose(t, l, holdfast.ErrClosed)
		}
	}
	noLockKeys(t, srv)
}
