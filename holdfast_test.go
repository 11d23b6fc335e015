package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		runChild()
		return
	}
	goleak.VerifyTestMain(m, leakOptions...)
}

// leakOptions ignores goroutines that outlive a test by design and are not
// the library's: protoactor's dead-letter throttle sleeps out its period,
// and a rueidis cluster client's delayed slot-map refresh sleeps out its
// delay (under a second) even after the client is closed, then ends.
var leakOptions = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewThrottleWithLogger.func1"),
	goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewThrottleWithLogger.func1"),
	goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
}

// waitFor is the generous bound of every wait on a channel in these tests:
// reaching it is a failure, never the expected path.
const waitFor = 15 * time.Second

func newClient(t testing.TB, srv *redistest.Server, cfg holdfast.Config) *holdfast.Client {
	t.Helper()
	cfg.Redis = srv.Client(t)
	c, err := holdfast.New(cfg)
	if err != nil {
		t.Fatalf("holdfast.New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func mustAcquire(t testing.TB, l *holdfast.Lock) {
	t.Helper()
	select {
	case <-l.Acquired:
	case <-l.Lost:
		t.Fatalf("lock %q lost before acquired: %v", l.Name(), l.Err())
	case <-time.After(waitFor):
		logGoroutines(t)
		t.Fatalf("lock %q not acquired within %v", l.Name(), waitFor)
	}
}

func mustLose(t testing.TB, l *holdfast.Lock, want error) {
	t.Helper()
	select {
	case <-l.Lost:
	case <-time.After(waitFor):
		logGoroutines(t)
		t.Fatalf("lock %q: Lost not closed within %v", l.Name(), waitFor)
	}
	if !errors.Is(l.Err(), want) {
		t.Fatalf("lock %q ended with %v, want %v", l.Name(), l.Err(), want)
	}
}

// logGoroutines logs every goroutine's stack (grouped), for a test about to
// fail because something did not happen in time: where the actors, workers
// and connections stood is what tells a stall from slowness.
func logGoroutines(t testing.TB) {
	t.Helper()
	t.Logf("goroutines at the timeout:\n%s", goroutines())
}

// goroutines is every goroutine's stack, goroutines with the same stack
// grouped (pprof's debug=1 form).
func goroutines() string {
	var b strings.Builder
	pprof.Lookup("goroutine").WriteTo(&b, 1)
	return b.String()
}

func notLost(t testing.TB, l *holdfast.Lock) {
	t.Helper()
	select {
	case <-l.Lost:
		t.Fatalf("lock %q lost: %v", l.Name(), l.Err())
	default:
	}
}

// lockKeys returns the lock hashes left in Redis (fence counters are kept
// by design: they never expire; waiter marks lapse by themselves).
func lockKeys(t testing.TB, srv *redistest.Server) []string {
	t.Helper()
	var out []string
	for _, k := range srv.Keys(t) {
		if !strings.HasSuffix(k, ":fence") && !strings.HasSuffix(k, ":w") {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func noLockKeys(t testing.TB, srv *redistest.Server) {
	t.Helper()
	if keys := lockKeys(t, srv); len(keys) > 0 {
		t.Fatalf("left behind in Redis: %v", keys)
	}
}

func TestMutualExclusionAcrossClients(t *testing.T) {
	srv := redistest.Start(t)
	clients := []*holdfast.Client{
		newClient(t, srv, holdfast.Config{}),
		newClient(t, srv, holdfast.Config{}),
	}
	const goroutines, rounds = 8, 15
	var (
		inside atomic.Int32
		mu     sync.Mutex
		tokens []uint64
		wg     sync.WaitGroup
		errs   = make(chan error, 2*goroutines)
	)
	for _, c := range clients {
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < rounds; i++ {
					l := c.Lock(context.Background(), "exclusive")
					if err := l.Wait(context.Background()); err != nil {
						errs <- err
						return
					}
					if n := inside.Add(1); n != 1 {
						errs <- fmt.Errorf("%d holders at once", n)
					}
					mu.Lock()
					tokens = append(tokens, l.Token())
					mu.Unlock()
					inside.Add(-1)
					if err := l.Release(context.Background()); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(tokens) != 2*goroutines*rounds {
		t.Fatalf("%d acquisitions, want %d", len(tokens), 2*goroutines*rounds)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("token %d at acquisition %d is not above %d", tokens[i], i, tokens[i-1])
		}
	}
	noLockKeys(t, srv)
}

func TestWatchdogKeepsHoldAndWaitTimesOut(t *testing.T) {
	srv := redistest.Start(t)
	const lease = 300 * time.Millisecond
	a := newClient(t, srv, holdfast.Config{WatchdogTimeout: lease})
	b := newClient(t, srv, holdfast.Config{WatchdogTimeout: lease})

	held := a.Lock(context.Background(), "watched")
	mustAcquire(t, held)
	first := held.Deadline()
	start := time.Now()
	waiter := b.Lock(context.Background(), "watched", holdfast.WithWait(4*lease))
	mustLose(t, waiter, holdfast.ErrWaitTimeout)
	for time.Since(start) < 4*lease {
		time.Sleep(lease / 10)
	}
	notLost(t, held)
	if !held.Deadline().After(first.Add(2 * lease)) {
		t.Fatalf("deadline %v did not move forward from %v", held.Deadline(), first)
	}
	if pttl, _ := srv.Do(t, "PTTL", scripts.LockKey("watched")).AsInt64(); pttl <= 0 {
		t.Fatalf("PTTL %d after %v: the watchdog did not renew", pttl, 4*lease)
	}
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustLose(t, held, holdfast.ErrReleased)
	noLockKeys(t, srv)
}

func TestReleaseWakesWaiterThroughPubSub(t *testing.T) {
	srv := redistest.Start(t)
	// A long lease: without the pub/sub message the waiter would sleep up
	// to its PTTL (seconds), so a fast wake-up proves the message.
	const lease = 20 * time.Second
	a := newClient(t, srv, holdfast.Config{WatchdogTimeout: lease})
	b := newClient(t, srv, holdfast.Config{WatchdogTimeout: lease})
	for round := 0; round < 3; round++ {
		held := a.Lock(context.Background(), "handoff")
		mustAcquire(t, held)
		waiter := b.Lock(context.Background(), "handoff")
		waitSubscribed(t, srv, "handoff")
		released := time.Now()
		if err := held.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		mustAcquire(t, waiter)
		woke := time.Since(released)
		t.Logf("round %d: release to acquire in %v (lease %v)", round, woke, lease)
		if woke > lease/10 {
			t.Fatalf("waiter woke after %v, not by pub/sub", woke)
		}
		if waiter.Token() <= held.Token() {
			t.Fatalf("token %d after %d", waiter.Token(), held.Token())
		}
		if err := waiter.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	noLockKeys(t, srv)
}

// waitSubscribed waits until someone subscribes to name's channel.
func waitSubscribed(t testing.TB, srv *redistest.Server, name string) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for time.Now().Before(deadline) {
		msg := srv.Do(t, "PUBSUB", "NUMSUB", scripts.Channel(name))
		arr, _ := msg.ToArray()
		if len(arr) == 2 {
			if n, _ := arr[1].AsInt64(); n > 0 {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("nobody subscribed to %s", scripts.Channel(name))
}

func TestKeyDeletedBehindHoldersBack(t *testing.T) {
	srv := redistest.Start(t)
	const lease = 600 * time.Millisecond
	c := newClient(t, srv, holdfast.Config{WatchdogTimeout: lease})
	l := c.Lock(context.Background(), "stolen")
	mustAcquire(t, l)
	srv.Do(t, "DEL", scripts.LockKey("stolen"))
	deleted := time.Now()
	mustLose(t, l, holdfast.ErrNotOwner)
	if took := time.Since(deleted); took > lease/3+lease/2 {
		t.Fatalf("Lost %v after the delete, more than one renewal interval (%v) and margin", took, lease/3)
	}
	if err := l.Release(context.Background()); !errors.Is(err, holdfast.ErrNotHeld) {
		t.Fatalf("Release after loss: %v, want ErrNotHeld", err)
	}
}

func TestFixedLeaseLostBeforeRedisExpiresKey(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{})
	const lease = 2 * time.Second
	l := c.Lock(context.Background(), "fixed", holdfast.WithLease(lease))
	mustAcquire(t, l)
	// The holder's deadline must lie before Redis expires the key: read
	// the key's expiry; its latest possible instant is after the PTTL
	// reply plus the millisecond PTTL rounds away. (Comparing instants,
	// not racing the expiry, keeps this true on a loaded machine.)
	deadline := l.Deadline()
	pttl, err := srv.Do(t, "PTTL", scripts.LockKey("fixed")).AsInt64()
	read := time.Now()
	if err != nil || pttl <= 0 {
		t.Fatalf("PTTL of a held lock: %d, %v", pttl, err)
	}
	expiresBy := read.Add(time.Duration(pttl+1) * time.Millisecond)
	if !deadline.Before(expiresBy) {
		t.Fatalf("told it holds until %v, but Redis expires the key by %v", deadline.Format(time.StampMicro), expiresBy.Format(time.StampMicro))
	}
	if late := deadline.Sub(time.Now().Add(lease)); late > 0 {
		t.Fatalf("deadline %v past a lease from now", late)
	}
	<-l.Lost
	if !errors.Is(l.Err(), holdfast.ErrLeaseExpired) {
		t.Fatalf("ended with %v", l.Err())
	}
	if now := time.Now(); now.Before(deadline.Add(-time.Second)) {
		t.Fatalf("Lost %v before its deadline", deadline.Sub(now))
	}
	t.Logf("fixed lease %v: deadline %v before Redis's expiry", lease, expiresBy.Sub(deadline))
}

func TestWaitBudgetAndTryOnce(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{})
	held := c.Lock(context.Background(), "busy")
	mustAcquire(t, held)

	once := c.Lock(context.Background(), "busy", holdfast.WithWait(0))
	mustLose(t, once, holdfast.ErrWaitTimeout)
	start := time.Now()
	budget := c.Lock(context.Background(), "busy", holdfast.WithWait(300*time.Millisecond))
	mustLose(t, budget, holdfast.ErrWaitTimeout)
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("gave up after %v, before its budget", took)
	}
	select {
	case <-budget.Acquired:
		t.Fatal("Acquired closed for a Lock that gave up")
	default:
	}
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	free := c.Lock(context.Background(), "busy", holdfast.WithWait(0))
	mustAcquire(t, free)
	free.Release(context.Background())
	noLockKeys(t, srv)
}

func TestContextEndsWaitingAndHolding(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{})
	holdCtx, endHold := context.WithCancel(context.Background())
	held := c.Lock(holdCtx, "ctx")
	mustAcquire(t, held)

	waitCtx, endWait := context.WithCancel(context.Background())
	waiter := c.Lock(waitCtx, "ctx")
	time.Sleep(50 * time.Millisecond)
	endWait()
	mustLose(t, waiter, context.Canceled)

	endHold()
	mustLose(t, held, context.Canceled)
	noLockKeys(t, srv)

	// A context already done gives up at once.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	l := c.Lock(done, "ctx")
	mustLose(t, l, context.Canceled)
	noLockKeys(t, srv)
}

func TestReentryWithOwner(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{})
	other := newClient(t, srv, holdfast.Config{})
	ctx := holdfast.WithOwner(context.Background(), "job-7")
	outer := c.Lock(ctx, "nested")
	mustAcquire(t, outer)
	inner := c.Lock(ctx, "nested")
	mustAcquire(t, inner)
	if inner.Token() != outer.Token() {
		t.Fatalf("inner token %d, outer %d: a nested hold shares its token", inner.Token(), outer.Token())
	}
	field := holdfast.Field(c, "job-7")
	if n := holdCount(t, srv, "nested", field); n != 2 {
		t.Fatalf("reentry count %d in Redis, want 2", n)
	}
	// Another owner of the same client waits.
	stranger := c.Lock(context.Background(), "nested", holdfast.WithWait(0))
	mustLose(t, stranger, holdfast.ErrWaitTimeout)
	// Another client with the same owner name is another owner.
	remote := other.Lock(holdfast.WithOwner(context.Background(), "job-7"), "nested", holdfast.WithWait(0))
	mustLose(t, remote, holdfast.ErrWaitTimeout)

	if err := inner.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	notLost(t, outer)
	if n := holdCount(t, srv, "nested", field); n != 1 {
		t.Fatalf("reentry count %d after inner release, want 1", n)
	}
	if err := outer.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	noLockKeys(t, srv)
}

func TestReleaseTwiceAndReleasePending(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{})
	l := c.Lock(context.Background(), "twice")
	mustAcquire(t, l)
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(context.Background()); !errors.Is(err, holdfast.ErrNotHeld) {
		t.Fatalf("second Release: %v, want ErrNotHeld", err)
	}
	if !errors.Is(l.Err(), holdfast.ErrReleased) {
		t.Fatalf("Err %v, want ErrReleased", l.Err())
	}

	holder := c.Lock(context.Background(), "twice")
	mustAcquire(t, holder)
	pending := c.Lock(context.Background(), "twice")
	if err := pending.Release(context.Background()); err != nil {
		t.Fatalf("Release of a pending Lock: %v", err)
	}
	mustLose(t, pending, holdfast.ErrReleased)
	notLost(t, holder)
	holder.Release(context.Background())
	noLockKeys(t, srv)
}

func TestCloseEndsHoldsAndWaiters(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{})
	var holds, waits []*holdfast.Lock
	for i := 0; i < 5; i++ {
		l := c.Lock(context.Background(), fmt.Sprintf("close-%d", i))
		mustAcquire(t, l)
		holds = append(holds, l)
		waits = append(waits, c.Lock(context.Background(), fmt.Sprintf("close-%d", i)))
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, l := range append(holds, waits...) {
		mustLose(t, l, holdfast.ErrClosed)
	}
	noLockKeys(t, srv)
	if n := c.Actors(); n != 0 {
		t.Fatalf("%d actors after Close", n)
	}
	late := c.Lock(context.Background(), "close-0")
	mustLose(t, late, holdfast.ErrClosed)
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{})
	cases := []struct {
		name string
		ctx  context.Context
		lock string
		opts []holdfast.Option
		want error
	}{
		{"empty name", context.Background(), "", nil, holdfast.ErrInvalidName},
		{"empty hash tag", context.Background(), "}x", nil, holdfast.ErrInvalidName},
		{"long name", context.Background(), strings.Repeat("n", 1025), nil, holdfast.ErrInvalidName},
		{"zero lease", context.Background(), "ok", []holdfast.Option{holdfast.WithLease(0)}, holdfast.ErrInvalidOption},
		{"negative lease", context.Background(), "ok", []holdfast.Option{holdfast.WithLease(-time.Second)}, holdfast.ErrInvalidOption},
		{"tiny lease", context.Background(), "ok", []holdfast.Option{holdfast.WithLease(time.Millisecond)}, holdfast.ErrInvalidOption},
		{"negative wait", context.Background(), "ok", []holdfast.Option{holdfast.WithWait(-1)}, holdfast.ErrInvalidOption},
		{"empty owner", holdfast.WithOwner(context.Background(), ""), "ok", nil, holdfast.ErrInvalidOption},
		{"reserved owner", holdfast.WithOwner(context.Background(), "~1"), "ok", nil, holdfast.ErrInvalidOption},
		{"nil context", nil, "ok", nil, holdfast.ErrInvalidOption},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := c.Lock(tc.ctx, tc.lock, tc.opts...)
			mustLose(t, l, tc.want)
			if err := l.Release(context.Background()); !errors.Is(err, holdfast.ErrNotHeld) {
				t.Fatalf("Release: %v", err)
			}
		})
	}
	if keys := srv.Keys(t); len(keys) != 0 {
		t.Fatalf("bad input wrote to Redis: %v", keys)
	}
	for _, cfg := range []holdfast.Config{
		{},
		{Redis: srv.Client(t), WatchdogTimeout: time.Millisecond},
		{Redis: srv.Client(t), ClientID: "a:b"},
		{Redis: srv.Client(t), CallTimeout: -1},
		{Redis: srv.Client(t), HandoffWindow: -1},
	} {
		if _, err := holdfast.New(cfg); !errors.Is(err, holdfast.ErrInvalidOption) {
			t.Fatalf("New(%+v): %v, want ErrInvalidOption", cfg, err)
		}
	}
}

func TestWrongTypeKey(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{})
	srv.Do(t, "SET", scripts.LockKey("taken"), "not a lock")
	l := c.Lock(context.Background(), "taken")
	select {
	case <-l.Lost:
	case <-time.After(waitFor):
		t.Fatal("Lost not closed")
	}
	if l.Err() == nil || !strings.Contains(l.Err().Error(), "WRONGTYPE") {
		t.Fatalf("ended with %v, want a WRONGTYPE error", l.Err())
	}
	if v, _ := srv.Do(t, "GET", scripts.LockKey("taken")).ToString(); v != "not a lock" {
		t.Fatalf("the foreign key changed to %q", v)
	}
}

func TestRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	const lease = 900 * time.Millisecond
	a := newClient(t, srv, holdfast.Config{WatchdogTimeout: lease, CallTimeout: 300 * time.Millisecond})
	b := newClient(t, srv, holdfast.Config{WatchdogTimeout: lease, CallTimeout: 300 * time.Millisecond})
	held := a.Lock(context.Background(), "restart")
	mustAcquire(t, held)

	srv.Kill()
	// Unreachable past the deadline: the holder is told.
	select {
	case <-held.Lost:
	case <-time.After(waitFor):
		t.Fatal("holder not told while Redis was down")
	}
	if err := held.Err(); !errors.Is(err, holdfast.ErrLeaseExpired) {
		t.Fatalf("holder ended with %v, want ErrLeaseExpired", err)
	}
	srv.Restart()

	again := a.Lock(context.Background(), "restart")
	mustAcquire(t, again)
	waiter := b.Lock(context.Background(), "restart")
	waitSubscribed(t, srv, "restart")
	released := time.Now()
	if err := again.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, waiter)
	woke := time.Since(released)
	t.Logf("after restart: release to acquire in %v", woke)
	if woke > lease/3 {
		t.Fatalf("waiter woke after %v: pub/sub did not come back after the restart", woke)
	}
	waiter.Release(context.Background())
	noLockKeys(t, srv)
}

func TestActorCrashReleasesAndRecovers(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{})
	l := c.Lock(context.Background(), "fragile")
	mustAcquire(t, l)
	waiter := c.Lock(context.Background(), "fragile")
	holdfast.CrashActor(c, "fragile")
	for _, x := range []*holdfast.Lock{l, waiter} {
		select {
		case <-x.Lost:
		case <-time.After(waitFor):
			t.Fatal("a Lock of the crashed actor was dropped silently")
		}
		if x.Err() == nil || !strings.Contains(x.Err().Error(), "lock actor failed") {
			t.Fatalf("ended with %v", x.Err())
		}
	}
	// The crashed actor's hold is released in Redis, not leaked.
	deadline := time.Now().Add(waitFor)
	for len(lockKeys(t, srv)) > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	noLockKeys(t, srv)
	again := c.Lock(context.Background(), "fragile")
	mustAcquire(t, again)
	if again.Token() <= l.Token() {
		t.Fatalf("token %d after %d", again.Token(), l.Token())
	}
	again.Release(context.Background())
}

// TestBusyActorKeepsOnlyLiveFields: an actor that is never idle (each
// Lock handed straight to the next) sees a new owner field per Lock. It
// keeps, to release should it crash, only the fields its machine still
// uses, not one per Lock it ever served; a crash then still releases the
// hold it has.
func TestBusyActorKeepsOnlyLiveFields(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{})
	ctx := context.Background()
	const served = 200
	cur := c.Lock(ctx, "busy")
	mustAcquire(t, cur)
	for i := 0; i < served; i++ {
		next := c.Lock(ctx, "busy")
		if err := cur.Release(ctx); err != nil {
			t.Fatal(err)
		}
		mustAcquire(t, next)
		cur = next
	}
	waiter := c.Lock(ctx, "busy")
	evals := func() int64 { return calls(t, srv, "evalsha") + calls(t, srv, "eval") }
	before := evals()
	holdfast.CrashActor(c, "busy")
	for _, x := range []*holdfast.Lock{cur, waiter} {
		select {
		case <-x.Lost:
		case <-time.After(waitFor):
			t.Fatal("a Lock of the crashed actor was dropped silently")
		}
	}
	deadline := time.Now().Add(waitFor)
	for len(lockKeys(t, srv)) > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	noLockKeys(t, srv)
	// The crash releases every field the actor kept: a few live ones and
	// fewer than 64 (twice the size at which the set is pruned) in all,
	// against one per Lock (202) were it kept whole.
	if n := evals() - before; n < 1 || n >= 64 {
		t.Fatalf("the crash sent %d releases after %d Locks", n, served+2)
	}
}

func TestIdleActorsPassivate(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{})
	for i := 0; i < 20; i++ {
		l := c.Lock(context.Background(), fmt.Sprintf("p-%d", i))
		mustAcquire(t, l)
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(waitFor)
	for c.Actors() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := c.Actors(); n != 0 {
		t.Fatalf("%d actors alive with nothing held", n)
	}
}

// BenchmarkUncontendedAcquireRelease measures one Lock+Wait+Release cycle on
// a free lock: one acquire and one release round trip to a local Redis.
func BenchmarkUncontendedAcquireRelease(b *testing.B) {
	srv := redistest.Start(b)
	c := newClient(b, srv, holdfast.Config{})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l := c.Lock(ctx, "bench")
		if err := l.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUncontendedParallel runs cycles on distinct locks from many
// goroutines, so concurrent actors share round trips (auto-pipelining).
func BenchmarkUncontendedParallel(b *testing.B) {
	srv := redistest.Start(b)
	c := newClient(b, srv, holdfast.Config{})
	ctx := context.Background()
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		name := fmt.Sprintf("bench-%d", next.Add(1))
		for pb.Next() {
			l := c.Lock(ctx, name)
			if err := l.Wait(ctx); err != nil {
				b.Error(err)
				return
			}
			if err := l.Release(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// calls is the number of calls of a command Redis has run, inside scripts
// too (INFO commandstats).
func calls(t testing.TB, srv *redistest.Server, cmd string) int64 {
	t.Helper()
	info, _ := srv.Do(t, "INFO", "commandstats").ToString()
	prefix := "cmdstat_" + cmd + ":calls="
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, prefix) {
			var n int64
			fmt.Sscanf(strings.TrimPrefix(line, prefix), "%d", &n)
			return n
		}
	}
	return 0
}

// TestLocalHandoff: a release with a waiter of the same Client queued hands
// the lock over in one script call and publishes nothing; once the streak
// limit is reached, the lock goes back through Redis and another Client's
// waiter gets its turn.
func TestLocalHandoff(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{HandoffLimit: 2, HandoffWindow: time.Minute})
	other := newClient(t, srv, holdfast.Config{})
	ctx := context.Background()
	first := c.Lock(ctx, "relay")
	mustAcquire(t, first)
	second, third, fourth := c.Lock(ctx, "relay"), c.Lock(ctx, "relay"), c.Lock(ctx, "relay")
	remote := other.Lock(ctx, "relay")
	waitSubscribed(t, srv, "relay")
	time.Sleep(50 * time.Millisecond) // let every waiter settle into its wait

	prev := first
	for _, next := range []*holdfast.Lock{second, third} {
		evalsha, publish := calls(t, srv, "evalsha"), calls(t, srv, "publish")
		if err := prev.Release(ctx); err != nil {
			t.Fatal(err)
		}
		mustAcquire(t, next)
		if n := calls(t, srv, "evalsha") - evalsha; n != 1 {
			t.Fatalf("handoff took %d script calls, want 1", n)
		}
		if n := calls(t, srv, "publish") - publish; n != 0 {
			t.Fatalf("handoff published %d messages, want none", n)
		}
		if next.Token() <= prev.Token() {
			t.Fatalf("token %d after %d", next.Token(), prev.Token())
		}
		prev = next
	}
	// Two handoffs in a row: the third release goes to Redis, and the other
	// Client's waiter competes on equal terms with this Client's last one.
	if err := third.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var winner, loser *holdfast.Lock
	select {
	case <-remote.Acquired:
		winner, loser = remote, fourth
	case <-fourth.Acquired:
		winner, loser = fourth, remote
	case <-time.After(waitFor):
		t.Fatal("nobody acquired the lock after the streak ended")
	}
	for _, l := range []*holdfast.Lock{winner, loser} {
		mustAcquire(t, l)
		if l.Token() <= prev.Token() {
			t.Fatalf("token %d after %d", l.Token(), prev.Token())
		}
		prev = l
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	noLockKeys(t, srv)
}

// TestRenewalsAreBatched holds many locks with the watchdog and counts the
// script calls Redis sees while only renewals happen.
func TestRenewalsAreBatched(t *testing.T) {
	srv := redistest.Start(t)
	// Unbatched, every renewal is a call of its own; batched, the holds
	// taken in one lease/30 step of the renewal grid share a call. A loaded
	// machine spreads the 250 acquisitions over more steps, hence a bound
	// with room to spare rather than the ~2 calls per period a quiet one makes.
	const lease, holds = 1200 * time.Millisecond, 250
	c := newClient(t, srv, holdfast.Config{WatchdogTimeout: lease})
	locks := make([]*holdfast.Lock, holds)
	for i := range locks {
		locks[i] = c.Lock(context.Background(), fmt.Sprintf("batch-%d", i))
	}
	for _, l := range locks {
		mustAcquire(t, l)
	}
	evalsha := func() int64 { return calls(t, srv, "evalsha") }
	before := evalsha()
	const periods = 6
	time.Sleep(periods * lease / 3)
	calls := evalsha() - before
	renewals := int64(periods * holds)
	t.Logf("%d holds over %d renewal periods: %d renew calls for ~%d renewals (%.1f keys per call)",
		holds, periods, calls, renewals, float64(renewals)/float64(max(calls, 1)))
	if calls == 0 || calls > renewals/6 {
		t.Fatalf("%d script calls for ~%d renewals: not batched", calls, renewals)
	}
	for _, l := range locks {
		notLost(t, l)
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	noLockKeys(t, srv)
}

// TestLingerCountsFromLastIdle: an actor's linger timer keeps running while
// the actor is busy again; when it fires, an actor idle for less than the
// linger time (actor.DefaultIdleTimeout, 1s) since its last idle moment
// lingers on, and one busy then passivates once idle long enough.
func TestLingerCountsFromLastIdle(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{})
	cycle := func() *holdfast.Lock {
		l := c.Lock(context.Background(), "linger")
		mustAcquire(t, l)
		return l
	}
	if err := cycle().Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := time.Now() // the linger timer fires about 1s from here
	time.Sleep(600 * time.Millisecond)
	if err := cycle().Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(first.Add(1300 * time.Millisecond)))
	if n := c.Actors(); n != 1 {
		t.Fatalf("%d actors 0.7s after the last release, want the lingering one", n)
	}
	// Busy across the next firing.
	held := cycle()
	time.Sleep(1200 * time.Millisecond)
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitFor)
	for c.Actors() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := c.Actors(); n != 0 {
		t.Fatalf("%d actors alive long after the last release", n)
	}
}

// holdCount is the reentry count field holds on the reentrant lock name in
// Redis (0 when it holds nothing there).
func holdCount(t *testing.T, srv *redistest.Server, name, field string) int64 {
	t.Helper()
	v, _ := srv.Do(t, "GET", scripts.LockKey(name)).ToString()
	if h, ok := scripts.ParseHold(v); ok && h.Field == field {
		return h.Count
	}
	return 0
}
