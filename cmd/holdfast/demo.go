package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/holdfasttest"
	"github.com/holdfast/holdfast/scripts"
)

const (
	demoLock  = "demo:invoices"
	demoLease = 1500 * time.Millisecond
)

const demoHelp = `usage: holdfast demo [--redis URL]

A short story of workers sharing one lock, told as a live timeline: waiting,
wake-ups by pub/sub, a crashed holder, fencing. Without --redis (and without
$HOLDFAST_REDIS) it runs on an embedded Redis inside this process.
`

// demoMain is `holdfast demo`: a short story of workers sharing one lock,
// told as a live timeline.
func demoMain(args []string, stdout io.Writer) (int, error) {
	fs := newFlagSet("demo")
	addr := fs.String("redis", "", "")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return 0, err
	}
	if len(rest) > 0 {
		return 0, usageError{fmt.Sprintf("demo: unexpected argument %q", rest[0])}
	}
	flagValue, where := *addr, ""
	if flagValue == "" && os.Getenv("HOLDFAST_REDIS") == "" {
		url, stop, err := holdfasttest.Embedded()
		if err != nil {
			return 1, fmt.Errorf("demo: starting an embedded Redis: %w", err)
		}
		defer stop()
		flagValue, where = url, "an embedded Redis (miniredis) inside this process"
	}
	t, err := parseRedis(flagValue)
	if err != nil {
		return 0, err
	}
	admin, err := connect(t)
	if err != nil {
		return 0, err
	}
	defer admin.Close()
	if where == "" {
		where = "Redis at " + t.display
	}
	dial := func() (rueidis.Client, error) { return rueidis.NewClient(t.opt) }
	del := func(key string) { admin.Do(context.Background(), admin.B().Del().Key(key).Build()) }
	d := &demo{out: stdout, start: time.Now(), dial: dial, del: del, store: &fencedStore{}}
	defer d.close()
	fmt.Fprintf(stdout, "holdfast demo on %s\n", where)
	fmt.Fprintf(stdout, "one lock %q; every worker is a separate Client; watchdog lease %v, renewed every %v\n\n",
		demoLock, demoLease, demoLease/3)
	if err := d.run(); err != nil {
		return 1, err
	}
	return 0, nil
}

type demo struct {
	out   io.Writer
	start time.Time
	dial  func() (rueidis.Client, error)
	del   func(key string)
	store *fencedStore

	mu       sync.Mutex
	redises  []rueidis.Client
	clients  []*holdfast.Client
	acquired int
	handoffs []time.Duration
	losses   int
}

func (d *demo) say(who, format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, "[%7.3fs] %-9s %s\n", time.Since(d.start).Seconds(), who, fmt.Sprintf(format, args...))
}

func (d *demo) heading(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, "\n%s\n", s)
}

// worker returns a new Client with its own Redis connection.
func (d *demo) worker() (*holdfast.Client, rueidis.Client, error) {
	rdb, err := d.dial()
	if err != nil {
		return nil, nil, err
	}
	c, err := holdfast.New(holdfast.Config{Redis: rdb, WatchdogTimeout: demoLease})
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	d.mu.Lock()
	d.redises = append(d.redises, rdb)
	d.clients = append(d.clients, c)
	d.mu.Unlock()
	return c, rdb, nil
}

func (d *demo) close() {
	for _, c := range d.clients {
		c.Close()
	}
	for _, r := range d.redises {
		r.Close()
	}
}

func (d *demo) run() error {
	names := []string{"worker-a", "worker-b", "worker-c"}
	clients := map[string]*holdfast.Client{}
	for _, n := range names {
		c, _, err := d.worker()
		if err != nil {
			return err
		}
		clients[n] = c
	}

	d.heading("Act 1: three workers take turns; waiters sleep until pub/sub announces the release")
	var releasedAt time.Time
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 5 * time.Millisecond)
			for round := 0; round < 2; round++ {
				d.say(n, "wants the lock")
				l := clients[n].Lock(context.Background(), demoLock)
				if err := l.Wait(context.Background()); err != nil {
					d.say(n, "gave up: %v", err)
					return
				}
				mu.Lock()
				var handoff time.Duration
				if !releasedAt.IsZero() {
					handoff = time.Since(releasedAt)
					d.handoffs = append(d.handoffs, handoff)
				}
				mu.Unlock()
				d.count()
				if handoff > 0 {
					d.say(n, "ACQUIRED  token %d  (%v after the last release, woken by pub/sub)", l.Token(), handoff.Round(10*time.Microsecond))
				} else {
					d.say(n, "ACQUIRED  token %d", l.Token())
				}
				d.store.write(d, n, l.Token())
				time.Sleep(120 * time.Millisecond)
				mu.Lock()
				releasedAt = time.Now()
				mu.Unlock()
				l.Release(context.Background())
				d.say(n, "released")
				time.Sleep(30 * time.Millisecond) // let the others in
			}
		}()
	}
	wg.Wait()

	d.heading("Act 2: worker-c crashes while holding: its Redis connection dies, so nobody renews its lease")
	crashC, crashRedis, err := d.worker()
	if err != nil {
		return err
	}
	lc := crashC.Lock(context.Background(), demoLock)
	if err := lc.Wait(context.Background()); err != nil {
		return err
	}
	d.count()
	d.say("worker-c", "ACQUIRED  token %d  (valid until +%v)", lc.Token(), time.Until(lc.Deadline()).Round(time.Millisecond))
	crashRedis.Close()
	crashed := time.Now()
	d.say("worker-c", "crashes: connection to Redis gone, the process itself runs on")
	la := clients["worker-a"].Lock(context.Background(), demoLock)
	d.say("worker-a", "wants the lock; waits at most the holder's remaining TTL, no polling")
	<-lc.Lost
	d.losses++
	d.say("worker-c", "LOST after %v: %v", time.Since(crashed).Round(time.Millisecond), lc.Err())
	d.say("worker-c", "stops touching the resource: Lost closed before Redis can give the lock away")
	if err := la.Wait(context.Background()); err != nil {
		return err
	}
	d.count()
	d.say("worker-a", "ACQUIRED  token %d  (%v after the crash, once Redis expired worker-c's key)", la.Token(), time.Since(crashed).Round(time.Millisecond))
	d.store.write(d, "worker-a", la.Token())
	d.say("worker-c", "a late write with its old token %d (say it was paused, unaware):", lc.Token())
	d.store.write(d, "worker-c", lc.Token())
	la.Release(context.Background())

	d.heading("Act 3: an operator deletes the key behind the holder's back")
	lb := clients["worker-b"].Lock(context.Background(), demoLock)
	if err := lb.Wait(context.Background()); err != nil {
		return err
	}
	d.count()
	d.say("worker-b", "ACQUIRED  token %d", lb.Token())
	time.Sleep(100 * time.Millisecond)
	d.del(scripts.LockKey(demoLock))
	deleted := time.Now()
	d.say("operator", "DEL %s", scripts.LockKey(demoLock))
	<-lb.Lost
	d.losses++
	d.say("worker-b", "LOST after %v (within one renewal interval, %v): %v", time.Since(deleted).Round(time.Millisecond), demoLease/3, lb.Err())
	if err := lb.Release(context.Background()); errors.Is(err, holdfast.ErrNotHeld) {
		d.say("worker-b", "Release now says: %v", err)
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	sort.Slice(d.handoffs, func(i, j int) bool { return d.handoffs[i] < d.handoffs[j] })
	p50 := time.Duration(0)
	if len(d.handoffs) > 0 {
		p50 = d.handoffs[len(d.handoffs)/2]
	}
	fmt.Fprintf(d.out, "\nSummary\n")
	fmt.Fprintf(d.out, "  acquisitions              %d\n", d.acquired)
	fmt.Fprintf(d.out, "  handoff latency p50       %v (release → next holder, woken by pub/sub)\n", p50.Round(10*time.Microsecond))
	fmt.Fprintf(d.out, "  losses detected           %d of 2 (crash, deleted key), each before anyone else was granted the lock\n", d.losses)
	fmt.Fprintf(d.out, "  stale writes rejected     %d (fencing tokens)\n", d.store.rejected)
	return nil
}

func (d *demo) count() {
	d.mu.Lock()
	d.acquired++
	d.mu.Unlock()
}

// fencedStore stands for the protected resource: it rejects tokens lower
// than the highest it has seen.
type fencedStore struct {
	mu       sync.Mutex
	highest  uint64
	rejected int
}

func (s *fencedStore) write(d *demo, who string, token uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.highest {
		s.rejected++
		d.say("store", "REJECTS %s's write with token %d: it has seen %d", who, token, s.highest)
		return
	}
	s.highest = token
	d.say("store", "accepts %s's write with token %d", who, token)
}
