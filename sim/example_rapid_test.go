package sim_test

// This file stands alone: copy it next to your own code, as a _test.go file,
// and it compiles with nothing but holdfast, sim and rapid.

import (
	"context"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/sim"
)

// fencedStore is the resource the job runners write to: it refuses a write
// whose fencing token is below the highest it has accepted, so a runner that
// lost its lock without knowing it cannot overwrite a newer runner's work.
type fencedStore struct {
	highest  uint64
	accepted []uint64 // tokens of the writes it took, in order
}

func (s *fencedStore) write(token uint64) {
	if token < s.highest {
		return // stale: a newer holder has written
	}
	s.highest = token
	s.accepted = append(s.accepted, token)
}

// jobRunner is the code under test: it takes the job's lock, writes its
// result to the store while it believes it holds the lock, and releases it.
type jobRunner struct {
	c   *holdfast.Client
	db  *fencedStore
	job *holdfast.Lock
}

// closed reports, without waiting, whether ch (a Lock's Acquired or Lost)
// is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// start asks for the job's lock unless a Lock of the runner is still on.
func (r *jobRunner) start() {
	if r.job == nil || closed(r.job.Lost) {
		r.job = r.c.Lock(context.Background(), "nightly-job", holdfast.WithWait(10*time.Second))
	}
}

// write does the job's work. A paused or partitioned runner can believe it
// holds a lock Redis has given to another runner: the token keeps it out.
func (r *jobRunner) write() {
	if r.job != nil && closed(r.job.Acquired) && !closed(r.job.Lost) {
		r.db.write(r.job.Token())
	}
}

// finish writes the job's last result and releases the lock. A release
// that fails (the hold was lost, Redis could not be reached) leaves the key
// to run out with its lease: nothing to undo, but worth a log line.
func (r *jobRunner) finish() error {
	if r.job == nil {
		return nil
	}
	r.write()
	return r.job.Release(context.Background())
}

// waiting reports whether the runner's Lock is still pending.
func (r *jobRunner) waiting() bool {
	return r.job != nil && !closed(r.job.Acquired) && !closed(r.job.Lost)
}

// Two job runners guarded by one lock write to a fenced store while rapid
// draws faults between their steps: the store never accepts a write older
// than one it accepted, and once the faults end no job waits for the lock.
func TestJobRunnersUnderChaos(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := sim.New(sim.Config{Seed: rapid.Int64().Draw(t, "seed"), Replicas: 1})
		db := &fencedStore{}
		cfg := sim.ClientConfig{WatchdogTimeout: time.Second}
		runners := []*jobRunner{{c: w.NewClient(cfg), db: db}, {c: w.NewClient(cfg), db: db}}
		pick := func(t *rapid.T) *jobRunner { return runners[rapid.IntRange(0, 1).Draw(t, "runner")] }
		t.Repeat(map[string]func(*rapid.T){
			"chaos": func(t *rapid.T) { w.Chaos(t) },
			"start": func(t *rapid.T) { pick(t).start() },
			"write": func(t *rapid.T) { pick(t).write() },
			"finish": func(t *rapid.T) {
				if err := pick(t).finish(); err != nil {
					t.Logf("release: %v", err)
				}
			},
			"": func(t *rapid.T) {
				for i := 1; i < len(db.accepted); i++ {
					if db.accepted[i] < db.accepted[i-1] {
						t.Fatalf("the store accepted a stale write: tokens %v", db.accepted)
					}
				}
			},
		})
		w.Settle() // no more faults: every job gets the lock or gives up
		for i, r := range runners {
			if r.waiting() {
				t.Fatalf("runner %d still waits for the lock after the faults ended", i+1)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
