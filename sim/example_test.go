package sim_test

import (
	"context"
	"fmt"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/sim"
)

// store is the resource a job runner protects: it rejects writes with a
// fencing token lower than the highest it has seen.
type store struct {
	highest  uint64
	accepted []string
	rejected int
}

func (s *store) write(who string, token uint64) {
	if token < s.highest {
		s.rejected++
		return
	}
	s.highest = token
	s.accepted = append(s.accepted, who)
}

// A job runner guarded by a lock, tested under a long pause (a GC pause, a
// stopped VM): the paused runner's lease runs out, another runner takes the
// lock, and the fencing token keeps the stale runner's late write out.
func Example_jobRunnerUnderPause() {
	w := sim.New(sim.Config{Seed: 7})
	runner1 := w.NewClient(sim.ClientConfig{ID: "runner1", WatchdogTimeout: 3 * time.Second})
	runner2 := w.NewClient(sim.ClientConfig{ID: "runner2", WatchdogTimeout: 3 * time.Second})
	db := &store{}

	first := runner1.Lock(context.Background(), "nightly-job")
	if err := first.Wait(context.Background()); err != nil {
		fmt.Println("runner1:", err)
		return
	}
	w.Pause(runner1) // frozen: no renewals, no timers
	second := runner2.Lock(context.Background(), "nightly-job", holdfast.WithWait(10*time.Second))
	if err := second.Wait(context.Background()); err != nil {
		fmt.Println("runner2:", err)
		return
	}
	db.write("runner2", second.Token())

	w.Resume(runner1) // it wakes up believing it holds the lock...
	db.write("runner1", first.Token())
	w.Advance(time.Millisecond)
	select {
	case <-first.Lost: // ...and is told at once that it does not
		fmt.Println("runner1 told:", first.Err())
	default:
		fmt.Println("runner1 not told")
	}
	fmt.Println("tokens:", first.Token(), second.Token())
	fmt.Println("store accepted:", db.accepted, "rejected:", db.rejected)
	second.Release(context.Background())
	runner1.Close()
	runner2.Close()
	// Output:
	// runner1 told: holdfast: lease expired before it could be renewed
	// tokens: 1 2
	// store accepted: [runner2] rejected: 1
}
