package renewal

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/holdfast/holdfast/scripts"
)

// fakeRedis records every batch and answers renewed for keys not in gone.
type fakeRedis struct {
	mu      sync.Mutex
	batches [][]string
	scripts []*scripts.Script // the script of each batch
	gone    map[string]bool
	err     error
}

func (f *fakeRedis) exec(_ context.Context, script *scripts.Script, keys, args []string) ([]bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(args) != 2*len(keys) {
		return nil, errors.New("args are not field, lease pairs")
	}
	f.batches = append(f.batches, append([]string(nil), keys...))
	f.scripts = append(f.scripts, script)
	if f.err != nil {
		return nil, f.err
	}
	out := make([]bool, len(keys))
	for i, k := range keys {
		out[i] = !f.gone[k]
	}
	return out, nil
}

type outcome struct {
	sent    time.Time
	renewed bool
	err     error
}

func setup(group func(string) uint16) (*Batcher, *fakeRedis, *[]func(), *clock.Mock) {
	f := &fakeRedis{gone: map[string]bool{}}
	var flushes []func()
	clk := clock.NewMock()
	b := New(Config{
		Clock: clk,
		After: func(_ time.Duration, fn func()) { flushes = append(flushes, fn) },
		Exec:  f.exec,
		Group: group,
	})
	return b, f, &flushes, clk
}

func add(b *Batcher, key string, results map[string]outcome, mu *sync.Mutex, wg *sync.WaitGroup) {
	wg.Add(1)
	b.Add(Item{Key: key, Field: "c:o", Lease: 3 * time.Second, Done: func(sent time.Time, renewed bool, err error) {
		mu.Lock()
		if _, dup := results[key]; dup {
			panic("Done called twice for " + key)
		}
		results[key] = outcome{sent, renewed, err}
		mu.Unlock()
		wg.Done()
	}})
}

func TestBatchesOfAtMost100PerGroup(t *testing.T) {
	b, f, flushes, clk := setup(func(key string) uint16 { return uint16(key[0]) })
	defer b.Close()
	results := map[string]outcome{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < 250; i++ {
		add(b, "a"+string(rune('0'+i%10))+string(rune(i)), results, &mu, &wg)
	}
	for i := 0; i < 30; i++ {
		add(b, "b"+string(rune(i)), results, &mu, &wg)
	}
	f.gone["b"+string(rune(7))] = true
	if len(*flushes) != 1 {
		t.Fatalf("%d flushes scheduled for one tick, want 1", len(*flushes))
	}
	before := clk.Now()
	(*flushes)[0]()
	wg.Wait()
	var sizes []int
	for _, batch := range f.batches {
		sizes = append(sizes, len(batch))
		for _, k := range batch[1:] {
			if k[0] != batch[0][0] {
				t.Fatalf("keys of groups %c and %c share a call", batch[0][0], k[0])
			}
		}
	}
	sort.Ints(sizes)
	if want := []int{30, 50, 100, 100}; len(sizes) != 4 || sizes[0] != want[0] || sizes[1] != want[1] || sizes[2] != want[2] || sizes[3] != want[3] {
		t.Fatalf("batch sizes %v, want %v", sizes, want)
	}
	if len(results) != 280 {
		t.Fatalf("%d results, want 280", len(results))
	}
	for k, r := range results {
		if r.err != nil || r.renewed == (k == "b"+string(rune(7))) || !r.sent.Equal(before) {
			t.Fatalf("%q: %+v", k, r)
		}
	}
	// The next renewals open a new batch.
	add(b, "a-late", results, &mu, &wg)
	if len(*flushes) != 2 {
		t.Fatal("no new flush after the first batch was sent")
	}
	(*flushes)[1]()
	wg.Wait()
}

func TestErrorsReachEveryItem(t *testing.T) {
	b, f, flushes, _ := setup(nil)
	defer b.Close()
	f.err = errors.New("connection reset")
	results := map[string]outcome{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, k := range []string{"x", "y", "z"} {
		add(b, k, results, &mu, &wg)
	}
	(*flushes)[0]()
	wg.Wait()
	if len(f.batches) != 1 {
		t.Fatalf("%d calls for one group, want 1", len(f.batches))
	}
	for k, r := range results {
		if r.err != f.err {
			t.Fatalf("%s: %+v", k, r)
		}
	}
}

func TestCloseFailsPending(t *testing.T) {
	b, f, flushes, _ := setup(nil)
	results := map[string]outcome{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	add(b, "pending", results, &mu, &wg)
	b.Close()
	add(b, "after", results, &mu, &wg)
	(*flushes)[0]() // the scheduled flush runs after Close
	wg.Wait()
	if len(f.batches) != 0 {
		t.Fatal("a batch was sent after Close")
	}
	for k, r := range results {
		if !errors.Is(r.err, ErrClosed) {
			t.Fatalf("%s: %+v", k, r)
		}
	}
}

// A call that never answers fails with the deadline error once Timeout has
// passed on the batcher's clock, so the watchdog can try again in time.
func TestTimeoutBoundsEachCall(t *testing.T) {
	clk := clock.NewMock()
	var flush func()
	started := make(chan struct{})
	b := New(Config{
		Clock: clk,
		After: func(_ time.Duration, fn func()) { flush = fn },
		Exec: func(ctx context.Context, _ *scripts.Script, keys, _ []string) ([]bool, error) {
			close(started)
			<-ctx.Done() // a dead connection: only the context ends the call
			return nil, ctx.Err()
		},
		Timeout: 5 * time.Second,
	})
	defer b.Close()
	got := make(chan error, 1)
	b.Add(Item{Script: scripts.RenewScript, Key: "k", Field: "c:o", Lease: time.Second, Done: func(_ time.Time, _ bool, err error) { got <- err }})
	flush()
	<-started
	clk.Add(4 * time.Second)
	select {
	case err := <-got:
		t.Fatalf("call ended after 4s of a 5s timeout: %v", err)
	default:
	}
	clk.Add(time.Second)
	if err := <-got; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
}

// TestScriptsNeverShareABatch: holds and waiter places are renewed by
// different scripts, so their items go in different calls even on one
// standalone server.
func TestScriptsNeverShareABatch(t *testing.T) {
	b, f, flushes, _ := setup(nil)
	defer b.Close()
	other := scripts.NewScript("other", "return {}")
	var wg sync.WaitGroup
	wg.Add(4)
	done := func(time.Time, bool, error) { wg.Done() }
	b.Add(Item{Script: scripts.RenewScript, Key: "k1", Field: "c:o", Lease: time.Second, Done: done})
	b.Add(Item{Script: other, Key: "k2", Field: "c:o", Lease: time.Second, Done: done})
	b.Add(Item{Script: scripts.RenewScript, Key: "k3", Field: "c:o", Lease: time.Second, Done: done})
	b.Add(Item{Script: other, Key: "k4", Field: "c:o", Lease: time.Second, Done: done})
	(*flushes)[0]()
	wg.Wait()
	if len(f.batches) != 2 {
		t.Fatalf("%d calls, want one per script", len(f.batches))
	}
	for i, batch := range f.batches {
		want := "k1,k3"
		if f.scripts[i] == other {
			want = "k2,k4"
		}
		if got := strings.Join(batch, ","); got != want {
			t.Fatalf("batch of %s has keys %s, want %s", f.scripts[i].Name, got, want)
		}
	}
}
