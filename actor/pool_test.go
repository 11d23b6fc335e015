package actor

import (
	"sync"
	"testing"
)

// A function scheduled between
// tailBegin and tailEnd runs on the scheduling goroutine, inside tailEnd.
func TestPoolTailRunsWorkOnTheCaller(t *testing.T) {
	p := &pool{throughput: 1}
	defer p.close()

	ran := false
	p.tailBegin()
	p.Go(func() { ran = true })
	if ran {
		t.Fatal("work ran before tailEnd")
	}
	p.tailEnd()
	if !ran {
		t.Fatal("work scheduled inside the tail did not run at tailEnd")
	}

	// Outside a tail, work goes to a worker goroutine.
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
	p.tailBegin()
	p.tailEnd() // nothing queued: returns at once
}

func TestPoolTailTakesOneEachAndNothingIsLost(t *testing.T) {
	p := &pool{throughput: 1}
	defer p.close()

	const tails, jobs = 8, 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	count := 0
	job := func() {
		mu.Lock()
		count++
		mu.Unlock()
		wg.Done()
	}
	wg.Add(jobs)
	var started sync.WaitGroup
	started.Add(tails)
	release := make(chan struct{})
	// The tails are plain goroutines: started with p.Go, a later one would
	// itself be queued behind an earlier tail.
	var ended sync.WaitGroup
	ended.Add(tails)
	for i := 0; i < tails; i++ {
		go func() {
			defer ended.Done()
			p.tailBegin()
			started.Done()
			<-release
			p.tailEnd()
		}()
	}
	started.Wait()
	for i := 0; i < jobs; i++ {
		p.Go(job)
	}
	p.mu.Lock()
	if len(p.queued) != tails {
		t.Errorf("%d jobs waiting for tails, want one per tail (%d)", len(p.queued), tails)
	}
	p.mu.Unlock()
	close(release)
	ended.Wait()
	wg.Wait()
	if count != jobs {
		t.Fatalf("%d of %d jobs ran", count, jobs)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tails != 0 || len(p.queued) != 0 {
		t.Fatalf("tails %d, queued %d after all tails ended", p.tails, len(p.queued))
	}
}
