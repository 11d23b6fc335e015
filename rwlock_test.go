package holdfast_test

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
)

// Read-write lock tests on a real redis-server.

func heldWithin(l *holdfast.Lock, d time.Duration) bool {
	select {
	case <-l.Acquired:
		return true
	case <-l.Lost:
		return false
	case <-time.After(d):
		return false
	}
}

func TestRWReadersShareAcrossClients(t *testing.T) {
	srv := redistest.Start(t)
	var ls []*holdfast.Lock
	for range 3 {
		c := newClient(t, srv, holdfast.Config{})
		l := c.ReadLock(context.Background(), "catalog")
		mustAcquire(t, l)
		ls = append(ls, l)
	}
	for i, l := range ls {
		notLost(t, l)
		if i > 0 && l.Token() <= ls[i-1].Token() {
			t.Fatalf("reader %d token %d not above reader %d's %d", i, l.Token(), i-1, ls[i-1].Token())
		}
	}
	for _, l := range ls {
		if err := l.Release(context.Background()); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	if n, _ := srv.Do(t, "EXISTS", scripts.LockKey("catalog")).AsInt64(); n != 0 {
		t.Fatal("lock hash left after every reader released")
	}
}

func TestRWWriterAndReadersExclude(t *testing.T) {
	srv := redistest.Start(t)
	a, b, c := newClient(t, srv, holdfast.Config{}), newClient(t, srv, holdfast.Config{}), newClient(t, srv, holdfast.Config{})
	ctx := context.Background()
	r1, r2 := a.ReadLock(ctx, "doc"), b.ReadLock(ctx, "doc")
	mustAcquire(t, r1)
	mustAcquire(t, r2)
	w := c.WriteLock(ctx, "doc")
	if heldWithin(w, 300*time.Millisecond) {
		t.Fatal("writer granted beside two readers")
	}
	// A new reader queues behind the waiting writer (writer preference).
	r3 := a.ReadLock(ctx, "doc")
	if heldWithin(r3, 200*time.Millisecond) {
		t.Fatal("a new reader overtook the waiting writer")
	}
	r1.Release(ctx)
	if heldWithin(w, 200*time.Millisecond) {
		t.Fatal("writer granted while a reader still held")
	}
	r2.Release(ctx)
	mustAcquire(t, w)
	if w.Token() <= r2.Token() {
		t.Fatalf("writer token %d not above the readers' (%d)", w.Token(), r2.Token())
	}
	if heldWithin(r3, 200*time.Millisecond) {
		t.Fatal("reader granted beside the writer")
	}
	w.Release(ctx)
	mustAcquire(t, r3)
	if r3.Token() <= w.Token() {
		t.Fatalf("reader after the writer got token %d, not above %d", r3.Token(), w.Token())
	}
	r3.Release(ctx)
}

// TestRWWaitingReadersWokenByOneMessage: three readers on three Clients wait
// for a writer; its release publishes one message, and all three are granted
// at once, far sooner than the writer's lease would have made them poll.
func TestRWWaitingReadersWokenByOneMessage(t *testing.T) {
	srv := redistest.Start(t)
	msgs := countMessages(t, srv, scripts.Channel("wake"))
	wc := newClient(t, srv, holdfast.Config{})
	ctx := context.Background()
	w := wc.WriteLock(ctx, "wake")
	mustAcquire(t, w)
	var rs []*holdfast.Lock
	for range 3 {
		rs = append(rs, newClient(t, srv, holdfast.Config{}).ReadLock(ctx, "wake"))
	}
	for _, r := range rs {
		if heldWithin(r, 100*time.Millisecond) {
			t.Fatal("reader granted beside the writer")
		}
	}
	before := msgs()
	released := time.Now()
	w.Release(ctx)
	for _, r := range rs {
		mustAcquire(t, r)
	}
	took := time.Since(released)
	t.Logf("3 readers granted %v after the writer's release (lease 30s)", took)
	if took > 5*time.Second {
		t.Fatalf("readers granted %v after the release: polled instead of woken", took)
	}
	time.Sleep(100 * time.Millisecond) // let any further message arrive
	if n := msgs() - before; n != 1 {
		t.Fatalf("%d messages on the channel for one release, want 1", n)
	}
	for _, r := range rs {
		r.Release(ctx)
	}
}

// countMessages subscribes to ch and returns a function counting the
// messages received so far.
func countMessages(t *testing.T, srv *redistest.Server, ch string) func() int {
	t.Helper()
	c := srv.Client(t)
	var mu sync.Mutex
	n := 0
	ctx, cancel := context.WithCancel(context.Background())
	subscribed := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Receive(ctx, c.B().Subscribe().Channel(ch).Build(), func(rueidis.PubSubMessage) {
			mu.Lock()
			n++
			mu.Unlock()
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	// Wait until the subscription is in place.
	go func() {
		for ctx.Err() == nil {
			if v, _ := srv.Do(t, "PUBSUB", "NUMSUB", ch).ToArray(); len(v) == 2 {
				if k, _ := v[1].AsInt64(); k > 0 {
					close(subscribed)
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	select {
	case <-subscribed:
	case <-time.After(waitFor):
		t.Fatal("subscription not in place")
	}
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// TestRWWriterNotStarvedByReaderStream: readers keep arriving (one every
// 20 ms on two Clients, each holding 100 ms, so that some reader always
// holds); a writer asking in the middle is granted once the readers present
// at its arrival have left, not when the stream stops.
func TestRWWriterNotStarvedByReaderStream(t *testing.T) {
	srv := redistest.Start(t)
	rc := []*holdfast.Client{newClient(t, srv, holdfast.Config{}), newClient(t, srv, holdfast.Config{})}
	wc := newClient(t, srv, holdfast.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	stream := func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			wg.Add(1)
			go func(c *holdfast.Client) {
				defer wg.Done()
				l := c.ReadLock(ctx, "stream")
				if l.Wait(ctx) != nil {
					return
				}
				mu.Lock()
				granted++
				mu.Unlock()
				time.Sleep(100 * time.Millisecond)
				l.Release(context.Background())
			}(rc[i%2])
		}
	}
	wg.Add(1)
	go stream()
	time.Sleep(400 * time.Millisecond)
	mu.Lock()
	before := granted
	mu.Unlock()
	asked := time.Now()
	w := wc.WriteLock(ctx, "stream", holdfast.WithWait(5*time.Second))
	mustAcquire(t, w)
	waited := time.Since(asked)
	w.Release(context.Background())
	cancel()
	wg.Wait()
	t.Logf("writer waited %v among %d readers granted before it asked (reader hold 100ms)", waited, before)
	if before < 10 {
		t.Fatalf("only %d readers granted before the writer asked: the stream did not run", before)
	}
	// Starvation would keep the writer waiting for the whole stream (5 s);
	// the bound is the readers present at its arrival (≤ 100 ms) plus the
	// round trips of their releases and its retry, with room for a loaded
	// machine.
	if waited > time.Second {
		t.Fatalf("writer waited %v behind a stream of 100 ms readers", waited)
	}
}

func TestRWWriteThenReadReentry(t *testing.T) {
	srv := redistest.Start(t)
	c, other := newClient(t, srv, holdfast.Config{}), newClient(t, srv, holdfast.Config{})
	ctx := holdfast.WithOwner(context.Background(), "job")
	w := c.WriteLock(ctx, "cfg")
	mustAcquire(t, w)
	r := c.ReadLock(ctx, "cfg")
	if !heldWithin(r, time.Second) {
		t.Fatalf("write -> read by the same owner not granted: %v", r.Err())
	}
	if r.Token() <= w.Token() {
		t.Fatalf("read hold token %d not above the write hold's %d", r.Token(), w.Token())
	}
	o := other.ReadLock(context.Background(), "cfg")
	if heldWithin(o, 200*time.Millisecond) {
		t.Fatal("another owner's reader granted beside the writer")
	}
	if err := w.Release(context.Background()); err != nil {
		t.Fatalf("release of the write hold: %v", err)
	}
	notLost(t, r)
	mustAcquire(t, o) // the former writer is a reader now: readers share
	ow := other.WriteLock(context.Background(), "cfg")
	if heldWithin(ow, 200*time.Millisecond) {
		t.Fatal("writer granted beside the former writer's read hold")
	}
	r.Release(context.Background())
	o.Release(context.Background())
	mustAcquire(t, ow)
	ow.Release(context.Background())
}

func TestRWReadThenWriteWouldDeadlock(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{})
	ctx := holdfast.WithOwner(context.Background(), "job")
	r := c.ReadLock(ctx, "cfg")
	mustAcquire(t, r)
	w := c.WriteLock(ctx, "cfg")
	mustLose(t, w, holdfast.ErrWouldDeadlock)
	notLost(t, r)
	// A reentry of the read hold is still fine.
	r2 := c.ReadLock(ctx, "cfg")
	mustAcquire(t, r2)
	r2.Release(context.Background())
	r.Release(context.Background())
}

func TestRWKindsDoNotMix(t *testing.T) {
	srv := redistest.Start(t)
	a, b := newClient(t, srv, holdfast.Config{}), newClient(t, srv, holdfast.Config{})
	ctx := context.Background()
	l := a.Lock(ctx, "plain")
	mustAcquire(t, l)
	mustLose(t, b.ReadLock(ctx, "plain"), holdfast.ErrWrongKind)
	mustLose(t, b.WriteLock(ctx, "plain"), holdfast.ErrWrongKind)
	r := a.ReadLock(ctx, "shared")
	mustAcquire(t, r)
	mustLose(t, b.Lock(ctx, "shared"), holdfast.ErrWrongKind)
	l.Release(ctx)
	r.Release(ctx)
}

// rwChildEnv makes the test binary act as a reader process (see init): it
// takes ReadLock "rwcrash" with a 1s watchdog lease as ClientID rwChildID,
// owner "o", prints "held", and holds until killed.
const (
	rwChildEnv = "HOLDFAST_TEST_RW_CHILD_REDIS"
	rwChildID  = "rwchild"
)

func init() {
	addr := os.Getenv(rwChildEnv)
	if addr == "" {
		return
	}
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	c, err := holdfast.New(holdfast.Config{Redis: rdb, WatchdogTimeout: time.Second, ClientID: rwChildID})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	l := c.ReadLock(holdfast.WithOwner(context.Background(), "o"), "rwcrash")
	if err := l.Wait(context.Background()); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("held")
	<-l.Lost
	fmt.Println("lost", l.Err())
	os.Exit(1)
}

// TestRWKilledReaderExpiresOnItsOwnDeadline: a reader process is SIGKILLed
// while another reader (lease 1s too) keeps renewing; the dead reader's hold
// ends within its own lease, and a writer then waits only for the live one.
func TestRWKilledReaderExpiresOnItsOwnDeadline(t *testing.T) {
	srv := redistest.Start(t)
	cmd := startChild(t, "held", rwChildEnv+"="+srv.Addr)
	live := newClient(t, srv, holdfast.Config{WatchdogTimeout: time.Second})
	r := live.ReadLock(context.Background(), "rwcrash")
	mustAcquire(t, r)
	time.Sleep(700 * time.Millisecond) // both renew at least once
	// The child's hold field is rwchild:INSTANCE:o:r, its instance drawn there.
	prefix := scripts.RWLeaseKey("rwcrash", rwChildID+":")
	suffix := ":" + scripts.RWField(scripts.RWRead, "o")
	dead := ""
	for _, k := range srv.Keys(t) {
		if strings.HasPrefix(k, prefix) && strings.HasSuffix(k, suffix) {
			dead = k
		}
	}
	if dead == "" {
		t.Fatal("the child's read hold is not in Redis")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for {
		if n, _ := srv.Do(t, "EXISTS", dead).AsInt64(); n == 0 {
			break
		}
		if time.Since(killed) > 3*time.Second {
			t.Fatal("the killed reader's hold outlived its 1s lease by far while another reader renewed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	gone := time.Since(killed)
	t.Logf("killed reader's hold gone %v after SIGKILL (lease 1s)", gone)
	if gone > 1500*time.Millisecond {
		t.Fatalf("killed reader's hold gone %v after the kill, more than its lease + margin", gone)
	}
	notLost(t, r)
	if ttl, _ := srv.Do(t, "PTTL", scripts.LockKey("rwcrash")).AsInt64(); ttl <= 0 {
		t.Fatalf("lock hash PTTL %d while a live reader holds", ttl)
	}
	w := newClient(t, srv, holdfast.Config{}).WriteLock(context.Background(), "rwcrash")
	if heldWithin(w, 200*time.Millisecond) {
		t.Fatal("writer granted beside the live reader")
	}
	released := time.Now()
	r.Release(context.Background())
	mustAcquire(t, w)
	if took := time.Since(released); took > time.Second {
		t.Fatalf("writer granted %v after the live reader left: it waited for the dead one", took)
	}
	w.Release(context.Background())
}

// TestRWInspectAndForceUnlock: Inspect shows a read-write lock's holds with
// their modes and its waiting writer; ForceUnlock frees it, raises the fence
// and lets the waiting writer in.
func TestRWInspectAndForceUnlock(t *testing.T) {
	srv := redistest.Start(t)
	a := newClient(t, srv, holdfast.Config{ClientID: "a", WatchdogTimeout: time.Second})
	b := newClient(t, srv, holdfast.Config{ClientID: "b"})
	ctx := context.Background()
	job := holdfast.WithOwner(ctx, "job")
	w := a.WriteLock(job, "inv")
	mustAcquire(t, w)
	r := a.ReadLock(job, "inv")
	mustAcquire(t, r)
	w.Release(ctx) // job is a reader now
	r2 := a.ReadLock(holdfast.WithOwner(ctx, "other"), "inv")
	mustAcquire(t, r2)
	bw := b.WriteLock(holdfast.WithOwner(ctx, "w"), "inv")
	if heldWithin(bw, 200*time.Millisecond) {
		t.Fatal("writer granted beside readers")
	}
	info, err := b.Inspect(ctx, "inv")
	if err != nil {
		t.Fatal(err)
	}
	want := []holdfast.Holder{{Owner: holdfast.Field(a, "job"), Count: 1, Mode: "read"}, {Owner: holdfast.Field(a, "other"), Count: 1, Mode: "read"}}
	if info.Kind != holdfast.KindRW || !reflect.DeepEqual(info.Holders, want) || info.Waiters != 1 {
		t.Fatalf("Inspect: kind %q holders %+v waiters %d, want %q %+v 1", info.Kind, info.Holders, info.Waiters, holdfast.KindRW, want)
	}
	if info.TTL <= 0 || info.TTL > holdfast.DefaultWaiterTimeout {
		t.Fatalf("TTL %v, want the longest live lease (the writer's claim, at most %v)", info.TTL, holdfast.DefaultWaiterTimeout)
	}
	if info.Fence != r2.Token() {
		t.Fatalf("fence %d, want the last grant's token %d", info.Fence, r2.Token())
	}
	if err := b.ForceUnlock(ctx, "inv"); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, bw)
	if bw.Token() <= r2.Token()+1 {
		t.Fatalf("writer token %d after a forced unlock of fence %d: not above the raised fence", bw.Token(), r2.Token())
	}
	mustLose(t, r, holdfast.ErrNotOwner)
	mustLose(t, r2, holdfast.ErrNotOwner)
	bw.Release(ctx)
	if keys := srv.Keys(t); len(keys) != 1 || keys[0] != scripts.FenceKey("inv") {
		t.Fatalf("keys left after the forced unlock and release: %v", keys)
	}
}
