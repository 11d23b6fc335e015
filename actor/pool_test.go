package actor

import (
	"runtime"
	"sync"
	"testing"
)

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
