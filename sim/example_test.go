package sim_test

import (
	"context"
	"fmt"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/sim"
)

// A job runner guarded by a lock, tested under a long pause (a GC pause, a
// stopped VM): the paused runner's lease runs out, another runner takes the
// lock, and the fencing token keeps the stale runner's late write out.
func Example_jobRunnerUnderPause() {
	w := sim.New(sim.Config{Seed: 7})
	runner1 := w.NewClient(sim.ClientConfig{ID: "runner1", WatchdogTimeout: 3 * time.Second})
	runner2 := w.NewClient(sim.ClientConfig{ID: "runner2", WatchdogTimeout: 3 * time.Second})
	ctx := context.Background()

	// The resource the runners protect: it rejects writes with a fencing
	// token lower than the highest it has seen.
	var highest uint64
	var accepted []string
	rejected := 0
	write := func(who string, token uint64) {
		if token < highest {
			rejected++
			return
		}
		highest = token
		accepted = append(accepted, who)
	}

	first := runner1.Lock(ctx, "nightly-job")
	if err := first.Wait(ctx); err != nil {
		fmt.Println("runner1:", err)
		return
	}
	w.Pause(runner1) // frozen: no renewals, no timers
	second := runner2.Lock(ctx, "nightly-job", holdfast.WithWait(10*time.Second))
	if err := second.Wait(ctx); err != nil {
		fmt.Println("runner2:", err)
		return
	}
	write("runner2", second.Token())

	w.Resume(runner1) // it wakes up believing it holds the lock...
	write("runner1", first.Token())
	w.Advance(time.Millisecond)
	select {
	case <-first.Lost: // ...and is told at once that it does not
		fmt.Println("runner1 told:", first.Err())
	default:
		fmt.Println("runner1 not told")
	}
	fmt.Println("tokens:", first.Token(), second.Token())
	fmt.Println("store accepted:", accepted, "rejected:", rejected)
	if err := second.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}
	if err := w.Close(); err != nil { // closes runner1 and runner2
		fmt.Println("close:", err)
	}
	// Output:
	// runner1 told: holdfast: lease expired before it could be renewed
	// tokens: 1 2
	// store accepted: [runner2] rejected: 1
}
