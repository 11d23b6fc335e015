package actor

import (
	"runtime"
	"sync"
	"testing"
)

// A function scheduled between tailBegin and tailEnd runs on the goroutine
// that began the tail, inside tailEnd.
func TestPoolTailRunsWorkOnTheCaller(t *testing.T) {
	p := newPool(1)
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

// Each open tail takes one function; the rest go to workers, and every
// function runs once.
func TestPoolTailTakesOneEachAndNothingIsLost(t *testing.T) {
	p := newPool(1)
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

// Actor turns run on at most maxRunners goroutines, in the order they were
// scheduled when there is one runner, and close ends the runners.
func TestPoolRunnersBoundTurnsAndKeepOrder(t *testing.T) {
	p := newPool(1)
	p.maxRunners = 3

	const turns = 5000
	var mu sync.Mutex
	var wg sync.WaitGroup
	running, most := 0, 0
	wg.Add(turns)
	for range turns {
		p.Schedule(func() {
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			runtime.Gosched()
			mu.Lock()
			running--
			mu.Unlock()
			wg.Done()
		})
	}
	wg.Wait()
	if most > p.maxRunners {
		t.Errorf("%d turns ran at once, want at most %d", most, p.maxRunners)
	}
	p.close()
	if p.runners != 0 || p.parked != 0 {
		t.Fatalf("after close: %d runners, %d parked", p.runners, p.parked)
	}

	one := newPool(1)
	one.maxRunners = 1
	var order []int
	done := make(chan struct{})
	for i := range turns {
		one.Schedule(func() {
			order = append(order, i) // one runner: no data race
			if i == turns-1 {
				close(done)
			}
		})
	}
	<-done
	one.close()
	for i, v := range order {
		if v != i {
			t.Fatalf("turn %d ran as number %d: not FIFO", v, i)
		}
	}
	if len(order) != turns {
		t.Fatalf("%d of %d turns ran", len(order), turns)
	}
}

// A turn scheduled while the pool closes either runs before close returns
// or is dropped: no runner starts once close waits for them (the race
// detector reports a WaitGroup Add during Wait), and none after.
func TestPoolScheduleDuringCloseStartsNoRunner(t *testing.T) {
	for i := 0; i < 50; i++ {
		p := newPool(1)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				p.Schedule(func() {})
				runtime.Gosched()
			}
		}()
		p.close()
		wg.Wait()
		p.mu.Lock()
		runners := p.runners
		p.mu.Unlock()
		p.Schedule(func() { t.Error("a turn ran after close") })
		p.mu.Lock()
		if p.runners != runners {
			t.Fatalf("a Schedule after close started a runner (%d → %d)", runners, p.runners)
		}
		p.mu.Unlock()
	}
}
