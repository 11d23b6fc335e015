package redissontest

import (
	"slices"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

func isNil(err error) bool { return rueidis.IsRedisNil(err) }

// renewalEntry is renewal.LockEntry / ReadLockEntry: the threads of this
// client holding one name under the watchdog, each with a count of grants
// not yet unlocked.
type renewalEntry struct {
	threads   []int64 // in first-grant order; the first is getFirstThreadId
	count     map[int64]int
	field     map[int64]string
	keyPrefix map[int64]string
}

// renewalTask is renewal.LockTask (read false) or renewal.ReadLockTask
// (read true): one timer chain per client that, while any name is
// registered, renews every registered name each watchdog/3, the first
// round watchdog/3 after the chain starts.
type renewalTask struct {
	c    *Client
	read bool

	mu      sync.Mutex
	entries map[string]*renewalEntry
	stop    chan struct{} // the running chain's; nil when not running
}

// add registers one grant (RenewalTask.add / ReadLockTask.add).
func (r *renewalTask) add(name string, thread int64, field, keyPrefix string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c.closed() {
		return
	}
	e := r.entries[name]
	if e == nil {
		e = &renewalEntry{count: map[int64]int{}, field: map[int64]string{}, keyPrefix: map[int64]string{}}
		r.entries[name] = e
	}
	if e.count[thread] == 0 {
		e.threads = append(e.threads, thread)
		e.field[thread] = field
		e.keyPrefix[thread] = keyPrefix
	}
	e.count[thread]++
	if r.stop == nil {
		r.stop = make(chan struct{})
		r.c.wg.Add(1)
		go r.chain(r.stop)
	}
}

// cancel is RenewalTask.cancelExpirationRenewal: one grant of thread fewer,
// or the whole name when thread is nil; the chain stops when no name is
// left.
func (r *renewalTask) cancel(name string, thread *int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[name]
	if e == nil {
		return
	}
	if thread != nil && e.count[*thread] > 0 {
		t := *thread
		e.count[t]--
		if e.count[t] == 0 {
			delete(e.count, t)
			delete(e.field, t)
			delete(e.keyPrefix, t)
			e.threads = slices.DeleteFunc(e.threads, func(x int64) bool { return x == t })
		}
	}
	if thread == nil || len(e.threads) == 0 {
		delete(r.entries, name)
	}
	if len(r.entries) == 0 && r.stop != nil {
		close(r.stop)
		r.stop = nil
	}
}

func (r *renewalTask) stopAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = map[string]*renewalEntry{}
	if r.stop != nil {
		close(r.stop)
		r.stop = nil
	}
}

func (r *renewalTask) chain(stop chan struct{}) {
	defer r.c.wg.Done()
	period := r.c.watchdog / 3
	t := time.NewTimer(period)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-stop:
			return
		case <-r.c.ctx.Done():
			return
		}
		r.renewOnce()
		t.Reset(period)
	}
}

// renewItem is one name in a renewal round.
type renewItem struct {
	name      string
	keyPrefix string
	threads   []int64  // LockTask: the first thread; ReadLockTask: all
	fields    []string // their fields
}

// renewOnce is one round: the names in EVALs of at most WatchdogBatchSize
// names (one name per EVAL against a cluster, where Redisson groups them by
// slot instead); a name the script answers 0 for loses one grant of each
// thread it was renewed for.
func (r *renewalTask) renewOnce() {
	r.mu.Lock()
	var items []renewItem
	for name, e := range r.entries {
		if len(e.threads) == 0 {
			continue
		}
		first := e.threads[0]
		it := renewItem{name: name, keyPrefix: e.keyPrefix[first]}
		if r.read {
			for _, t := range e.threads {
				it.threads = append(it.threads, t)
				it.fields = append(it.fields, e.field[t])
			}
		} else {
			it.threads = []int64{first}
			it.fields = []string{e.field[first]}
		}
		items = append(items, it)
	}
	r.mu.Unlock()

	batch := WatchdogBatchSize
	if r.c.rdb.Mode() == rueidis.ClientModeCluster {
		batch = 1
	}
	for len(items) > 0 {
		n := min(batch, len(items))
		chunk := items[:n]
		items = items[n:]
		alive, err := r.eval(chunk)
		if err != nil {
			continue // Redisson logs the error and keeps the chain going
		}
		for i, it := range chunk {
			if i < len(alive) && alive[i] == 1 {
				continue
			}
			for _, t := range it.threads {
				r.cancel(it.name, &t)
			}
		}
	}
}

func (r *renewalTask) eval(chunk []renewItem) ([]int64, error) {
	lease := itoa(r.c.watchdogMs())
	var keys []string
	args := []string{lease}
	for _, it := range chunk {
		if r.read {
			keys = append(keys, it.name, it.keyPrefix)
			args = append(args, itoa(int64(len(it.fields))))
			args = append(args, it.fields...)
		} else {
			keys = append(keys, it.name)
			args = append(args, it.fields[0])
		}
	}
	s := renewLua
	if r.read {
		s = renewReadLua
	}
	return s.Exec(r.c.ctx, r.c.rdb, keys, args).AsIntSlice()
}
