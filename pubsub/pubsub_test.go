package pubsub_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/pubsub"
)

// TestMain checks for leaked goroutines. A rueidis cluster client whose
// slot map changed closes the old connections after a sleep of its own,
// and its delayed slot-map refresh sleeps out its delay even once the
// client is closed; both may outlive the test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"))
}

// waitFor bounds every wait: generous, because a slow CI box must not fail
// a correct build; a broken one fails after it.
const waitFor = 10 * time.Second

// recorder collects what one listener is told. Its fn never blocks.
type recorder struct {
	ch       chan pubsub.Event
	overflow atomic.Bool
	// lost records Lost too (most tests follow Resync alone, as the lock
	// actors do).
	lost bool
}

func newRecorder() *recorder { return &recorder{ch: make(chan pubsub.Event, 256)} }

func (r *recorder) fn(ev pubsub.Event) {
	if ev == pubsub.Lost && !r.lost {
		return
	}
	select {
	case r.ch <- ev:
	default:
		r.overflow.Store(true)
	}
}

func (r *recorder) expect(t *testing.T, want pubsub.Event) {
	t.Helper()
	select {
	case got := <-r.ch:
		if got != want {
			t.Fatalf("event %v, want %v", got, want)
		}
	case <-time.After(waitFor):
		t.Fatalf("no %v within %v", want, waitFor)
	}
	if r.overflow.Load() {
		t.Fatal("recorder overflowed")
	}
}

// expectNone checks that nothing is pending. It is exact when called after a
// marker event that the dispatcher delivered later than anything this
// listener could have been told (see marker).
func (r *recorder) expectNone(t *testing.T) {
	t.Helper()
	select {
	case got := <-r.ch:
		t.Fatalf("unexpected event %v", got)
	default:
	}
}

// inspector looks at the server through one client of its own.
type inspector struct {
	t   *testing.T
	srv *redistest.Server
	c   rueidis.Client
}

func inspect(t *testing.T, srv *redistest.Server) *inspector {
	return &inspector{t: t, srv: srv, c: srv.Client(t)}
}

// do runs one command. It tries again after a connection error, which the
// client's first command after a server restart gets.
func (in *inspector) do(args ...string) (res rueidis.RedisResult) {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	for range 3 {
		res = in.c.Do(ctx, in.c.B().Arbitrary(args...).Build())
		if err := res.NonRedisError(); err == nil || ctx.Err() != nil {
			break
		}
	}
	return res
}

func (in *inspector) publish(ch string) {
	in.t.Helper()
	if err := in.do("PUBLISH", ch, "released").Error(); err != nil {
		in.t.Fatalf("PUBLISH %s: %v", ch, err)
	}
}

// clients counts the server's client connections (CLIENT LIST).
func (in *inspector) clients() int {
	in.t.Helper()
	list, err := in.do("CLIENT", "LIST").ToString()
	if err != nil {
		in.t.Fatalf("CLIENT LIST: %v", err)
	}
	return strings.Count(list, "\n")
}

func (in *inspector) numsub(ch string) int64 {
	in.t.Helper()
	arr, err := in.do("PUBSUB", "NUMSUB", ch).ToArray()
	if err != nil || len(arr) != 2 {
		in.t.Fatalf("PUBSUB NUMSUB %s: %v %v", ch, arr, err)
	}
	n, _ := arr[1].AsInt64()
	return n
}

func (in *inspector) channels(pattern string) []string {
	in.t.Helper()
	chs, err := in.do("PUBSUB", "CHANNELS", pattern).AsStrSlice()
	if err != nil {
		in.t.Fatalf("PUBSUB CHANNELS: %v", err)
	}
	return chs
}

// pubsubClients counts the server's connections in pub/sub mode.
func (in *inspector) pubsubClients() int {
	in.t.Helper()
	list, err := in.do("CLIENT", "LIST", "TYPE", "pubsub").ToString()
	if err != nil {
		in.t.Fatalf("CLIENT LIST: %v", err)
	}
	return strings.Count(list, "\n") // one line per client
}

// subCounts lists, smallest first, how many channels each of the server's
// pub/sub connections is subscribed to (CLIENT LIST's sub=).
func (in *inspector) subCounts() []int {
	in.t.Helper()
	list, err := in.do("CLIENT", "LIST", "TYPE", "pubsub").ToString()
	if err != nil {
		in.t.Fatalf("CLIENT LIST: %v", err)
	}
	var counts []int
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "sub="); ok {
				n, _ := strconv.Atoi(v)
				counts = append(counts, n)
			}
		}
	}
	slices.Sort(counts)
	return counts
}

// recv waits for ch to yield, failing after waitFor.
func recv[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitFor):
		t.Fatalf("no %s within %v", what, waitFor)
	}
}

// advanceUntil moves mock on by step, at most tries times, until cond
// holds, polling it for a share of waitFor after each step: a goroutine
// that had not armed its timer when the clock first moved gets another
// step, and a timer far longer than step never fires.
func advanceUntil(t *testing.T, mock *clock.Mock, step time.Duration, tries int, what string, cond func() bool) {
	t.Helper()
	for range tries {
		mock.Add(step)
		deadline := time.Now().Add(waitFor / time.Duration(tries))
		for time.Now().Before(deadline) {
			if cond() {
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	t.Fatalf("not within %d steps of %v on the mock clock: %s", tries, step, what)
}

// eventually polls cond until it holds, failing after waitFor.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", waitFor, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func newManager(t *testing.T, srv *redistest.Server, dedicated bool) *pubsub.Manager {
	m := pubsub.New(pubsub.Config{Redis: srv.Client(t), Dedicated: dedicated})
	t.Cleanup(m.Close)
	return m
}

// onBoth runs test on the shared transport (Receive on the client's own
// connection, the default outside a cluster) and on a dedicated connection
// (what a cluster's masters get).
func onBoth(t *testing.T, test func(t *testing.T, dedicated bool)) {
	t.Run("shared", func(t *testing.T) { test(t, false) })
	t.Run("dedicated", func(t *testing.T) { test(t, true) })
}

func TestMessagesReachTheChannelsListenersOnly(t *testing.T) {
	onBoth(t, testMessagesReachTheChannelsListenersOnly)
}

func testMessagesReachTheChannelsListenersOnly(t *testing.T, dedicated bool) {
	srv := redistest.Start(t)
	in := inspect(t, srv)
	m := newManager(t, srv, dedicated)
	a, b, other := newRecorder(), newRecorder(), newRecorder()
	unA := m.Subscribe("ch:1", a.fn)
	unB := m.Subscribe("ch:1", b.fn)
	defer m.Subscribe("ch:2", other.fn)()
	a.expect(t, pubsub.Subscribed)
	b.expect(t, pubsub.Subscribed)
	other.expect(t, pubsub.Subscribed)

	// The dispatcher delivers in the order Redis sent, so once other has
	// its ch:2 message, a and b have had everything for ch:1 before it.
	in.publish("ch:1")
	in.publish("ch:2")
	other.expect(t, pubsub.Message)
	a.expect(t, pubsub.Message)
	b.expect(t, pubsub.Message)
	a.expectNone(t)
	b.expectNone(t)
	other.expectNone(t)

	unA()
	unA() // idempotent
	in.publish("ch:1")
	in.publish("ch:2")
	other.expect(t, pubsub.Message)
	b.expect(t, pubsub.Message)
	a.expectNone(t)
	b.expectNone(t)
	unB()
	if n := in.numsub("ch:2"); n != 1 {
		t.Fatalf("NUMSUB ch:2 = %d, want 1", n)
	}
}

func TestOneServerSubscriptionPerChannel(t *testing.T) {
	onBoth(t, testOneServerSubscriptionPerChannel)
}

func testOneServerSubscriptionPerChannel(t *testing.T, dedicated bool) {
	srv := redistest.Start(t)
	in := inspect(t, srv)
	m := newManager(t, srv, dedicated)
	// More channels than one SUBSCRIBE carries, and several listeners per
	// channel subscribing from different goroutines.
	const nChannels, perChannel = 600, 3
	name := func(i int) string { return fmt.Sprintf("rc:%d", i) }
	recs := make([][]*recorder, nChannels)
	unsubs := make([][]func(), nChannels)
	for i := range recs {
		recs[i] = make([]*recorder, perChannel)
		unsubs[i] = make([]func(), perChannel)
	}
	var wg sync.WaitGroup
	for j := 0; j < perChannel; j++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < nChannels; i++ {
				r := newRecorder()
				recs[i][j] = r
				unsubs[i][j] = m.Subscribe(name(i), r.fn)
			}
		}()
	}
	wg.Wait()
	for i := range recs {
		for _, r := range recs[i] {
			r.expect(t, pubsub.Subscribed)
		}
	}
	if got := m.Channels(); got != nChannels {
		t.Fatalf("Channels() = %d, want %d", got, nChannels)
	}
	if got := len(in.channels("rc:*")); got != nChannels {
		t.Fatalf("PUBSUB CHANNELS shows %d channels, want %d", got, nChannels)
	}
	for _, i := range []int{0, 1, nChannels / 2, nChannels - 1} {
		if n := in.numsub(name(i)); n != 1 {
			t.Fatalf("NUMSUB %s = %d, want one shared subscription", name(i), n)
		}
	}
	// The shared transport carries the first SharedChannels on the
	// client's own connection, the rest on one dedicated connection.
	want := 1
	if !dedicated {
		want = 2
	}
	if n := in.pubsubClients(); n != want {
		t.Fatalf("%d pub/sub connections, want %d", n, want)
	}

	// All but one listener per channel leave: still subscribed, still told.
	for i := range unsubs {
		for _, un := range unsubs[i][1:] {
			un()
		}
	}
	if got := len(in.channels("rc:*")); got != nChannels {
		t.Fatalf("PUBSUB CHANNELS shows %d channels with a listener left, want %d", got, nChannels)
	}
	in.publish(name(7))
	recs[7][0].expect(t, pubsub.Message)

	// The last ones leave concurrently.
	for j := 0; j < 4; j++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := j; i < nChannels; i += 4 {
				unsubs[i][0]()
			}
		}()
	}
	wg.Wait()
	// Channels() reaches zero only once Redis confirmed every UNSUBSCRIBE.
	eventually(t, "Channels() == 0", func() bool { return m.Channels() == 0 })
	if got := in.channels("rc:*"); len(got) != 0 {
		t.Fatalf("PUBSUB CHANNELS after every listener left: %d left, e.g. %v", len(got), got[0])
	}
	if n := in.numsub(name(0)); n != 0 {
		t.Fatalf("NUMSUB %s = %d after its listeners left", name(0), n)
	}
}

func TestLateListenerIsToldSubscribedAndMessages(t *testing.T) {
	onBoth(t, testLateListenerIsToldSubscribedAndMessages)
}

func testLateListenerIsToldSubscribedAndMessages(t *testing.T, dedicated bool) {
	srv := redistest.Start(t)
	in := inspect(t, srv)
	m := newManager(t, srv, dedicated)
	first := newRecorder()
	defer m.Subscribe("late", first.fn)()
	first.expect(t, pubsub.Subscribed)

	late := newRecorder()
	defer m.Subscribe("late", late.fn)()
	late.expect(t, pubsub.Subscribed) // not Resync: it is new
	in.publish("late")
	late.expect(t, pubsub.Message)
	first.expect(t, pubsub.Message)
}

// TestFirstEventIsSubscribed adds listeners while messages flood the
// channel: each must be told Subscribed before any Message.
func TestFirstEventIsSubscribed(t *testing.T) { onBoth(t, testFirstEventIsSubscribed) }

func testFirstEventIsSubscribed(t *testing.T, dedicated bool) {
	srv := redistest.Start(t)
	m := newManager(t, srv, dedicated)
	stop := flood(t, srv, "flood")
	defer stop()
	for i := 0; i < 100; i++ {
		var first atomic.Int32
		first.Store(-1)
		got := make(chan struct{})
		un := m.Subscribe("flood", func(ev pubsub.Event) {
			if first.CompareAndSwap(-1, int32(ev)) {
				close(got)
			}
		})
		select {
		case <-got:
		case <-time.After(waitFor):
			t.Fatal("no event")
		}
		un()
		if ev := pubsub.Event(first.Load()); ev != pubsub.Subscribed {
			t.Fatalf("listener %d: first event %v, want Subscribed", i, ev)
		}
	}
}

// flood publishes on ch as fast as it can until stop is called.
func flood(t *testing.T, srv *redistest.Server, ch string) (stop func()) {
	c := srv.Client(t)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
				c.Do(context.Background(), c.B().Publish().Channel(ch).Message("x").Build())
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

func TestNoCallAfterUnsubscribe(t *testing.T) { onBoth(t, testNoCallAfterUnsubscribe) }

func testNoCallAfterUnsubscribe(t *testing.T, dedicated bool) {
	srv := redistest.Start(t)
	m := newManager(t, srv, dedicated)
	// One long-lived listener keeps the channel subscribed, so that some
	// of the listeners below join a confirmed channel and some do not.
	keep := make(chan struct{})
	var keepOnce sync.Once
	defer m.Subscribe("busy", func(pubsub.Event) { keepOnce.Do(func() { close(keep) }) })()
	stop := flood(t, srv, "busy")
	defer stop()

	var violations atomic.Int32
	for i := 0; i < 300; i++ {
		var gone atomic.Bool
		told := make(chan struct{}, 1)
		un := m.Subscribe("busy", func(pubsub.Event) {
			if gone.Load() {
				violations.Add(1)
			}
			select {
			case told <- struct{}{}:
			default:
			}
		})
		if i%2 == 0 {
			recv(t, told, "an event") // unsubscribe while calls are flowing
		}
		un()
		gone.Store(true)
		if i == 150 {
			recv(t, keep, "the long-lived listener's first event")
		}
	}
	// Give the flood time to reach every removed listener if the guarantee
	// were broken: wait for a fresh listener to see several messages.
	probe := make(chan struct{}, 1000)
	defer m.Subscribe("busy", func(pubsub.Event) {
		select {
		case probe <- struct{}{}:
		default:
		}
	})()
	for i := 0; i < 50; i++ {
		select {
		case <-probe:
		case <-time.After(waitFor):
			t.Fatal("probe listener starved")
		}
	}
	if n := violations.Load(); n > 0 {
		t.Fatalf("listeners called %d times after their unsubscribe returned", n)
	}
}

// TestUnsubscribeWaitsForARunningCall: an unsubscribe that races with a
// call in progress returns only after that call.
func TestUnsubscribeWaitsForARunningCall(t *testing.T) {
	onBoth(t, testUnsubscribeWaitsForARunningCall)
}

func testUnsubscribeWaitsForARunningCall(t *testing.T, dedicated bool) {
	srv := redistest.Start(t)
	in := inspect(t, srv)
	m := newManager(t, srv, dedicated)
	entered, gate := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	un := m.Subscribe("slow", func(ev pubsub.Event) {
		if calls.Add(1) == 2 { // the first Message
			close(entered)
			<-gate
		}
	})
	eventually(t, "Subscribed", func() bool { return calls.Load() == 1 })
	in.publish("slow")
	recv(t, entered, "the first Message")
	returned := make(chan struct{})
	go func() { un(); close(returned) }()
	select {
	case <-returned:
		t.Fatal("unsubscribe returned while the listener was running")
	case <-time.After(100 * time.Millisecond):
	}
	close(gate)
	select {
	case <-returned:
	case <-time.After(waitFor):
		t.Fatal("unsubscribe did not return after the listener did")
	}
	in.publish("slow")
	eventually(t, "channel dropped", func() bool { return m.Channels() == 0 })
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d calls, want 2", n)
	}
}

// TestResubscribeQuickly: subscribe, unsubscribe, subscribe again in quick
// succession (before and after confirmation) must end subscribed.
func TestResubscribeQuickly(t *testing.T) { onBoth(t, testResubscribeQuickly) }

func testResubscribeQuickly(t *testing.T, dedicated bool) {
	srv := redistest.Start(t)
	in := inspect(t, srv)
	m := newManager(t, srv, dedicated)
	for i := 0; i < 50; i++ {
		m.Subscribe("again", func(pubsub.Event) {})()
	}
	r := newRecorder()
	un := m.Subscribe("again", r.fn)
	r.expect(t, pubsub.Subscribed)
	if n := in.numsub("again"); n != 1 {
		t.Fatalf("NUMSUB = %d, want 1", n)
	}
	in.publish("again")
	r.expect(t, pubsub.Message)

	// Now with a confirmed channel: the UNSUBSCRIBE is on its way when the
	// next listener arrives.
	for i := 0; i < 20; i++ {
		un()
		r = newRecorder()
		un = m.Subscribe("again", r.fn)
		r.expect(t, pubsub.Subscribed)
		if n := in.numsub("again"); n != 1 {
			t.Fatalf("round %d: NUMSUB = %d, want 1", i, n)
		}
		in.publish("again")
		r.expect(t, pubsub.Message)
		r.expectNone(t)
	}
	un()
	eventually(t, "Channels() == 0", func() bool { return m.Channels() == 0 })
	if n := in.numsub("again"); n != 0 {
		t.Fatalf("NUMSUB = %d after the last listener left", n)
	}
}

func TestResyncAfterRestart(t *testing.T) { onBoth(t, testResyncAfterRestart) }

func testResyncAfterRestart(t *testing.T, dedicated bool) {
	srv := redistest.Start(t)
	in := inspect(t, srv)
	m := newManager(t, srv, dedicated)
	a, b := newRecorder(), newRecorder()
	defer m.Subscribe("lock:a", a.fn)()
	defer m.Subscribe("lock:b", b.fn)()
	a.expect(t, pubsub.Subscribed)
	b.expect(t, pubsub.Subscribed)

	srv.Restart()
	a.expect(t, pubsub.Resync)
	b.expect(t, pubsub.Resync)
	in.publish("lock:a")
	a.expect(t, pubsub.Message)

	// While Redis is down: a listener joins (subscribed once it is back,
	// told Subscribed, not Resync) and another leaves (not resubscribed).
	srv.Kill()
	eventually(t, "disconnected", func() bool { return !pubsub.Connected(m) })
	late := newRecorder()
	defer m.Subscribe("lock:late", late.fn)()
	gone := newRecorder()
	unGone := m.Subscribe("lock:gone", gone.fn)
	unGone()
	srv.Restart()
	late.expect(t, pubsub.Subscribed)
	a.expect(t, pubsub.Resync)
	b.expect(t, pubsub.Resync)
	in.publish("lock:late")
	in.publish("lock:b")
	late.expect(t, pubsub.Message)
	b.expect(t, pubsub.Message)
	a.expectNone(t)
	gone.expectNone(t)
	got := in.channels("lock:*")
	if len(got) != 3 || in.numsub("lock:gone") != 0 {
		t.Fatalf("channels after restart %v, want lock:a, lock:b, lock:late", got)
	}
	if n := m.Channels(); n != 3 {
		t.Fatalf("Channels() = %d, want 3", n)
	}
}

// TestLostWhenTheConnectionBreaks: a listener told Subscribed is told Lost
// when Redis goes away, once, and Resync when it is back; a listener that
// joins while Redis is away is told neither, only Subscribed.
func TestLostWhenTheConnectionBreaks(t *testing.T) { onBoth(t, testLostWhenTheConnectionBreaks) }

func testLostWhenTheConnectionBreaks(t *testing.T, dedicated bool) {
	srv := redistest.Start(t)
	m := newManager(t, srv, dedicated)
	a := newRecorder()
	a.lost = true
	defer m.Subscribe("lost:a", a.fn)()
	a.expect(t, pubsub.Subscribed)
	srv.Kill()
	a.expect(t, pubsub.Lost)
	eventually(t, "disconnected", func() bool { return !pubsub.Connected(m) })
	late := newRecorder()
	late.lost = true
	defer m.Subscribe("lost:late", late.fn)()
	time.Sleep(300 * time.Millisecond) // reconnect attempts fail meanwhile
	a.expectNone(t)
	late.expectNone(t)
	srv.Restart()
	a.expect(t, pubsub.Resync)
	late.expect(t, pubsub.Subscribed)
	a.expectNone(t)
	late.expectNone(t)
}

// TestReconnectWaitsForTheInjectedClock: the reconnect backoff runs on the
// Config's clock, not on real time.
func TestReconnectWaitsForTheInjectedClock(t *testing.T) {
	srv := redistest.Start(t)
	mock := clock.NewMock()
	m := pubsub.New(pubsub.Config{Redis: srv.Client(t), Clock: mock, Dedicated: true})
	defer m.Close()
	r := newRecorder()
	defer m.Subscribe("clocked", r.fn)()
	r.expect(t, pubsub.Subscribed)

	srv.Kill()
	eventually(t, "disconnected", func() bool { return !pubsub.Connected(m) })
	srv.Restart()
	// Redis is back, but the backoff has not elapsed on the mock clock.
	select {
	case ev := <-r.ch:
		t.Fatalf("%v before the backoff elapsed on the injected clock", ev)
	case <-time.After(200 * time.Millisecond):
	}
	if pubsub.Connected(m) {
		t.Fatal("reconnected before the backoff elapsed on the injected clock")
	}
	deadline := time.After(waitFor)
	for {
		mock.Add(time.Second) // at least the longest backoff
		select {
		case ev := <-r.ch:
			if ev != pubsub.Resync {
				t.Fatalf("event %v, want Resync", ev)
			}
			return
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatal("no Resync after advancing the clock")
		}
	}
}

func TestCloseReleasesEverything(t *testing.T) { onBoth(t, testCloseReleasesEverything) }

func testCloseReleasesEverything(t *testing.T, dedicated bool) {
	srv := redistest.Start(t)
	in := inspect(t, srv)
	rdb := srv.Client(t)
	// Start the client's own goroutines before the snapshot: they belong
	// to rdb and end with it, at the test's cleanup.
	if err := rdb.Do(context.Background(), rdb.B().Ping().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	// A subscription on the client's connection starts its background
	// reader and writer, which then live as long as the connection.
	warm := pubsub.New(pubsub.Config{Redis: rdb})
	w := newRecorder()
	unW := warm.Subscribe("warm", w.fn)
	w.expect(t, pubsub.Subscribed)
	unW()
	warm.Close()
	in.do("PING")
	before := goleak.IgnoreCurrent()

	m := pubsub.New(pubsub.Config{Redis: rdb, Dedicated: dedicated})
	r := newRecorder()
	unR := m.Subscribe("x", r.fn)
	pending := newRecorder()
	m.Subscribe("y", pending.fn) // never unsubscribed
	r.expect(t, pubsub.Subscribed)
	pending.expect(t, pubsub.Subscribed)
	m.Close()
	m.Close()
	goleak.VerifyNone(t, before)

	if n := m.Channels(); n != 0 {
		t.Fatalf("Channels() = %d after Close", n)
	}
	eventually(t, "server-side subscriptions gone", func() bool {
		return in.numsub("x") == 0 && in.numsub("y") == 0 && in.pubsubClients() == 0
	})
	unR()
	in.publish("x")
	var called atomic.Bool
	m.Subscribe("z", func(pubsub.Event) { called.Store(true) })()
	in.publish("z")
	r.expectNone(t)
	pending.expectNone(t)
	if called.Load() {
		t.Fatal("listener called after Close")
	}
	if n := in.pubsubClients(); n != 0 {
		t.Fatalf("Subscribe after Close made %d pub/sub connections", n)
	}
}

func TestCloseWhileRedisIsDown(t *testing.T) { onBoth(t, testCloseWhileRedisIsDown) }

func testCloseWhileRedisIsDown(t *testing.T, dedicated bool) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	m := pubsub.New(pubsub.Config{Redis: rdb, Dedicated: dedicated})
	r := newRecorder()
	m.Subscribe("down", r.fn)
	r.expect(t, pubsub.Subscribed)
	srv.Kill()
	eventually(t, "disconnected", func() bool { return !pubsub.Connected(m) })
	closed := make(chan struct{})
	go func() { m.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(waitFor):
		t.Fatal("Close hung while Redis was down")
	}
	if n := m.Channels(); n != 0 {
		t.Fatalf("Channels() = %d after Close", n)
	}
}

func TestNoConnectionUntilFirstSubscribe(t *testing.T) {
	onBoth(t, testNoConnectionUntilFirstSubscribe)
}

func testNoConnectionUntilFirstSubscribe(t *testing.T, dedicated bool) {
	srv := redistest.Start(t)
	in := inspect(t, srv)
	rdb := srv.Client(t)
	if err := rdb.Do(context.Background(), rdb.B().Ping().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	base := in.clients()
	m := pubsub.New(pubsub.Config{Redis: rdb, Dedicated: dedicated})
	defer m.Close()
	if n := in.clients(); n != base {
		t.Fatalf("%d connections after New, want %d", n, base)
	}
	r := newRecorder()
	defer m.Subscribe("lazy", r.fn)()
	r.expect(t, pubsub.Subscribed)
	// The shared transport subscribes on the client's own connection; a
	// dedicated one dials one more.
	want := base
	if dedicated {
		want++
	}
	if n := in.clients(); n != want {
		t.Fatalf("%d connections once subscribed, want %d", n, want)
	}
	in.publish("lazy")
	r.expect(t, pubsub.Message)
}

// TestIdleConnectionCloses: once no channel is left on it for IdleLinger
// of the injected clock, the dedicated connection closes (no client and no
// keep-alive PINGs spent on nothing), and the next Subscribe dials again.
func TestIdleConnectionCloses(t *testing.T) {
	srv := redistest.Start(t)
	in := inspect(t, srv)
	mock := clock.NewMock()
	m := pubsub.New(pubsub.Config{Redis: srv.Client(t), Clock: mock, Dedicated: true})
	defer m.Close()

	r := newRecorder()
	un := m.Subscribe("burst", r.fn)
	r.expect(t, pubsub.Subscribed)
	open := in.clients()
	un()
	eventually(t, "unsubscribe confirmed", func() bool { return m.Channels() == 0 })
	// Not before IdleLinger has passed on the injected clock.
	mock.Add(pubsub.IdleLinger / 2)
	time.Sleep(50 * time.Millisecond)
	if !pubsub.Connected(m) {
		t.Fatal("connection closed before IdleLinger passed")
	}
	eventually(t, "idle connection closed", func() bool {
		mock.Add(pubsub.IdleLinger)
		return !pubsub.Connected(m)
	})
	eventually(t, "server saw the connection go", func() bool { return in.clients() == open-1 })

	// The next burst dials again and is served as the first.
	r2 := newRecorder()
	defer m.Subscribe("burst", r2.fn)()
	r2.expect(t, pubsub.Subscribed)
	in.publish("burst")
	r2.expect(t, pubsub.Message)
	r.expectNone(t)
}

// TestSharedChannelsThenADedicatedConnection: outside a cluster the first
// SharedChannels channels ride the client's own connection, the next ones
// one dedicated connection; every listener hears its channel either way,
// and a slot on the shared transport is free again once its channel left.
func TestSharedChannelsThenADedicatedConnection(t *testing.T) {
	srv := redistest.Start(t)
	in := inspect(t, srv)
	rdb := srv.Client(t)
	if err := rdb.Do(context.Background(), rdb.B().Ping().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	m := pubsub.New(pubsub.Config{Redis: rdb})
	defer m.Close()
	base := in.clients()

	recs := make([]*recorder, pubsub.SharedChannels+1)
	unsubs := make([]func(), len(recs))
	for i := range recs[:pubsub.SharedChannels] {
		recs[i] = newRecorder()
		unsubs[i] = m.Subscribe(fmt.Sprintf("s:%d", i), recs[i].fn)
		recs[i].expect(t, pubsub.Subscribed)
	}
	if n := in.clients(); n != base {
		t.Fatalf("%d connections with %d channels, want %d (none dialled)", n, pubsub.SharedChannels, base)
	}
	last := len(recs) - 1
	recs[last] = newRecorder()
	unsubs[last] = m.Subscribe(fmt.Sprintf("s:%d", last), recs[last].fn)
	recs[last].expect(t, pubsub.Subscribed)
	if n := in.clients(); n != base+1 {
		t.Fatalf("%d connections with one channel more, want %d (one dialled)", n, base+1)
	}
	for i, r := range recs {
		in.publish(fmt.Sprintf("s:%d", i))
		r.expect(t, pubsub.Message)
	}

	// A shared channel leaves: the next new channel takes its place on the
	// client's connection, and the dedicated one is not needed for it.
	unsubs[0]()
	eventually(t, "s:0 unsubscribed and dropped", func() bool {
		return in.numsub("s:0") == 0 && m.Channels() == pubsub.SharedChannels
	})
	again := newRecorder()
	unAgain := m.Subscribe("s:again", again.fn)
	again.expect(t, pubsub.Subscribed)
	in.publish("s:again")
	again.expect(t, pubsub.Message)
	if got, want := in.subCounts(), fmt.Sprint([]int{1, pubsub.SharedChannels}); fmt.Sprint(got) != want {
		t.Fatalf("channels per pub/sub connection %v, want %s", got, want)
	}

	unAgain()
	for _, un := range unsubs {
		un()
	}
	eventually(t, "Channels() == 0", func() bool { return m.Channels() == 0 })
	if got := in.channels("s:*"); len(got) != 0 {
		t.Fatalf("PUBSUB CHANNELS after every listener left: %v", got)
	}
}

// TestSharedRefusedSubscribeBacksOffOnTheInjectedClock: a SUBSCRIBE that
// Redis refuses (here NOPERM: the user may not use the channel) is tried
// again after a backoff on the Config's clock, and the listener is told
// Subscribed once Redis takes it.
func TestSharedRefusedSubscribeBacksOffOnTheInjectedClock(t *testing.T) {
	srv := redistest.Start(t)
	in := inspect(t, srv)
	srv.Do(t, "ACL", "SETUSER", "waiter", "on", ">pw", "~*", "+@all", "resetchannels")
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  []string{srv.Addr},
		Username:     "waiter",
		Password:     "pw",
		DisableCache: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	mock := clock.NewMock()
	refused := make(chan string, 16)
	logger := slog.New(funcHandler(func(rec slog.Record) {
		select {
		case refused <- rec.Message:
		default:
		}
	}))
	m := pubsub.New(pubsub.Config{Redis: rdb, Clock: mock, Logger: logger})
	defer m.Close()

	r := newRecorder()
	defer m.Subscribe("denied", r.fn)()
	// The refusal is in once the Manager logs it; its goroutine then waits
	// for the backoff's timer on the mock clock.
	select {
	case msg := <-refused:
		if !strings.Contains(msg, "subscribing again after a backoff") {
			t.Fatalf("logged %q", msg)
		}
	case <-time.After(waitFor):
		t.Fatal("the refused SUBSCRIBE was not logged")
	}
	select {
	case ev := <-r.ch:
		t.Fatalf("%v while Redis refuses the channel", ev)
	case <-time.After(100 * time.Millisecond):
	}

	srv.Do(t, "ACL", "SETUSER", "waiter", "allchannels")
	if n := in.numsub("denied"); n != 0 {
		t.Fatalf("NUMSUB = %d before the backoff elapsed on the injected clock", n)
	}
	// At least the backoff; another step for a goroutine that had logged
	// but not armed its timer when the clock first moved.
	var first pubsub.Event
	advanceUntil(t, mock, time.Second, 3, "a subscription after the backoff", func() bool {
		select {
		case first = <-r.ch:
			return true
		default:
			return false
		}
	})
	if first != pubsub.Subscribed {
		t.Fatalf("first event after the backoff: %v, want Subscribed", first)
	}
	in.publish("denied")
	r.expect(t, pubsub.Message)
}

// funcHandler is a slog.Handler that hands every record to a function.
type funcHandler func(slog.Record)

func (h funcHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h funcHandler) Handle(_ context.Context, r slog.Record) error {
	h(r)
	return nil
}
func (h funcHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h funcHandler) WithGroup(string) slog.Handler      { return h }

// rueidis dials a connection once for every caller that needs it, under the
// first caller's context. A listener that leaves while its shared round is
// dialing must not cancel that dial: the client's own commands waiting on it
// would fail with "operation was canceled" though the server is fine. The
// round ends once Redis confirms its SUBSCRIBE, or unsubscribeWait later on
// the injected clock when the dial does not finish.
func TestSharedLeaveWhileDialingFailsNoOtherCommand(t *testing.T) {
	srv := redistest.Start(t)
	in := inspect(t, srv)
	var (
		mu      sync.Mutex
		gate    chan struct{} // nil: dial at once
		dialing = make(chan struct{}, 64)
	)
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  []string{srv.Addr},
		DisableCache: true,
		DialCtxFn: func(ctx context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			mu.Lock()
			g := gate
			mu.Unlock()
			if g != nil {
				dialing <- struct{}{}
				select {
				case <-g:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return d.DialContext(ctx, "tcp", dst)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	mock := clock.NewMock()
	m := pubsub.New(pubsub.Config{Redis: rdb, Clock: mock})
	defer m.Close()

	// breakAndLeave breaks the round's connection with dials held at a new
	// gate, waits for the round to dial again, starts a PING (it needs the
	// same connection, so it waits on that dial) and lets the listener go.
	breakAndLeave := func(channel string) (open func(), ping <-chan error) {
		r := newRecorder()
		leave := m.Subscribe(channel, r.fn)
		r.expect(t, pubsub.Subscribed)
		g := make(chan struct{})
		mu.Lock()
		gate = g
		mu.Unlock()
		in.do("CLIENT", "KILL", "TYPE", "pubsub")
		recv(t, dialing, "dial by the round")
		pinged := make(chan error, 1)
		go func() { pinged <- rdb.Do(context.Background(), rdb.B().Ping().Build()).Error() }()
		time.Sleep(50 * time.Millisecond) // for the PING to reach the dial
		leave()
		return func() {
			mu.Lock()
			gate = nil
			mu.Unlock()
			close(g)
		}, pinged
	}

	// The dial finishes: the PING gets its answer, then the round ends.
	open, ping := breakAndLeave("first")
	select {
	case err := <-ping:
		t.Fatalf("PING ended before its dial did: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	open()
	if err := <-ping; err != nil {
		t.Fatalf("PING beside a round whose listener left while it dialed: %v", err)
	}
	eventually(t, "the round's end after its confirmation", func() bool {
		return m.Channels() == 0 && in.numsub("first") == 0
	})

	// The dial does not finish: the round ends unsubscribeWait later on the
	// injected clock, and only then is the dial given up.
	open, ping = breakAndLeave("second")
	select {
	case err := <-ping:
		t.Fatalf("PING ended before unsubscribeWait: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if n := m.Channels(); n != 1 {
		t.Fatalf("Channels = %d before unsubscribeWait, want the dialing round's 1", n)
	}
	mock.Add(time.Second)
	eventually(t, "the round's end after unsubscribeWait", func() bool { return m.Channels() == 0 })
	open()
	<-ping
}

// A channel's UNSUBSCRIBE that a hung server never answers holds its
// goroutine (and Close) for unsubscribeWait on the injected clock, no more:
// the channel is dropped then, and the server has it no longer once it
// resumes and reads the UNSUBSCRIBE.
func TestSharedUnsubscribeFromAHungServerIsBounded(t *testing.T) {
	srv := redistest.Start(t)
	in := inspect(t, srv)
	mock := clock.NewMock()
	m := pubsub.New(pubsub.Config{Redis: srv.Client(t), Clock: mock})
	defer m.Close()
	r := newRecorder()
	leave := m.Subscribe("hung", r.fn)
	r.expect(t, pubsub.Subscribed)

	srv.Freeze()
	leave()
	time.Sleep(100 * time.Millisecond)
	if n := m.Channels(); n != 1 {
		t.Fatalf("Channels = %d while the UNSUBSCRIBE waits for a hung server, want 1", n)
	}
	// unsubscribeWait; another step for a goroutine that had not armed its
	// timer yet when the clock first moved.
	advanceUntil(t, mock, time.Second, 3, "the channel dropped after unsubscribeWait", func() bool { return m.Channels() == 0 })
	srv.Thaw()
	eventually(t, "the server without the channel", func() bool { return in.numsub("hung") == 0 })
}
