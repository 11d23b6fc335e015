package pubsub_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/pubsub"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const waitFor = 10 * time.Second

// events collects what one listener is told.
type events struct {
	ch chan pubsub.Event
}

func newEvents() *events { return &events{ch: make(chan pubsub.Event, 64)} }

func (e *events) fn(ev pubsub.Event) { e.ch <- ev }

func (e *events) expect(t *testing.T, want pubsub.Event) {
	t.Helper()
	select {
	case got := <-e.ch:
		if got != want {
			t.Fatalf("event %v, want %v", got, want)
		}
	case <-time.After(waitFor):
		t.Fatalf("no event %v within %v", want, waitFor)
	}
}

func (e *events) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case got := <-e.ch:
		t.Fatalf("unexpected event %v", got)
	case <-time.After(d):
	}
}

func numsub(t *testing.T, srv *redistest.Server, ch string) int64 {
	t.Helper()
	arr, _ := srv.Do(t, "PUBSUB", "NUMSUB", ch).ToArray()
	n, _ := arr[1].AsInt64()
	return n
}

func publish(t *testing.T, srv *redistest.Server, ch string) {
	t.Helper()
	srv.Do(t, "PUBLISH", ch, "released")
}

func TestOneSubscriptionManyListeners(t *testing.T) {
	srv := redistest.Start(t)
	m := pubsub.New(pubsub.Config{Redis: srv.Client(t)})
	defer m.Close()
	a, b, other := newEvents(), newEvents(), newEvents()
	unA := m.Subscribe("ch:1", a.fn)
	unB := m.Subscribe("ch:1", b.fn)
	unO := m.Subscribe("ch:2", other.fn)
	a.expect(t, pubsub.Subscribed)
	b.expect(t, pubsub.Subscribed)
	other.expect(t, pubsub.Subscribed)
	if n := numsub(t, srv, "ch:1"); n != 1 {
		t.Fatalf("NUMSUB ch:1 = %d, want one shared subscription", n)
	}
	publish(t, srv, "ch:1")
	a.expect(t, pubsub.Message)
	b.expect(t, pubsub.Message)
	other.quiet(t, 50*time.Millisecond)

	unA()
	unA() // idempotent
	publish(t, srv, "ch:1")
	b.expect(t, pubsub.Message)
	a.quiet(t, 50*time.Millisecond)
	unB()
	unO()
	deadline := time.Now().Add(waitFor)
	for numsub(t, srv, "ch:1")+numsub(t, srv, "ch:2") > 0 {
		if time.Now().After(deadline) {
			t.Fatal("channels still subscribed after their last listener left")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := m.Channels(); n != 0 {
		t.Fatalf("Channels() = %d", n)
	}
	// A late listener on a confirmed channel is told at once.
	c := newEvents()
	un := m.Subscribe("ch:1", c.fn)
	c.expect(t, pubsub.Subscribed)
	d := newEvents()
	defer m.Subscribe("ch:1", d.fn)()
	d.expect(t, pubsub.Subscribed)
	un()
}

func TestNoCallAfterUnsubscribe(t *testing.T) {
	srv := redistest.Start(t)
	m := pubsub.New(pubsub.Config{Redis: srv.Client(t)})
	defer m.Close()
	subscribed := make(chan struct{})
	var once sync.Once
	defer m.Subscribe("busy", func(ev pubsub.Event) {
		once.Do(func() { close(subscribed) }) // must not block: the flood below is large
	})()
	<-subscribed
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := srv.Client(t)
		for {
			select {
			case <-stop:
				return
			default:
				c.Do(context.Background(), c.B().Publish().Channel("busy").Message("x").Build())
			}
		}
	}()
	for i := 0; i < 200; i++ {
		var mu sync.Mutex
		gone := false
		un := m.Subscribe("busy", func(pubsub.Event) {
			mu.Lock()
			defer mu.Unlock()
			if gone {
				t.Error("listener called after its unsubscribe returned")
			}
		})
		time.Sleep(100 * time.Microsecond)
		un()
		mu.Lock()
		gone = true
		mu.Unlock()
	}
	close(stop)
	wg.Wait()
}

func TestResyncAfterRestart(t *testing.T) {
	srv := redistest.Start(t)
	m := pubsub.New(pubsub.Config{Redis: srv.Client(t)})
	defer m.Close()
	e := newEvents()
	defer m.Subscribe("lock:ch", e.fn)()
	e.expect(t, pubsub.Subscribed)
	srv.Restart()
	e.expect(t, pubsub.Resync)
	publish(t, srv, "lock:ch")
	e.expect(t, pubsub.Message)
	// A listener that arrives while Redis is down is subscribed once it is back.
	srv.Kill()
	late := newEvents()
	defer m.Subscribe("late:ch", late.fn)()
	srv.Restart()
	late.expect(t, pubsub.Subscribed)
	e.expect(t, pubsub.Resync)
	publish(t, srv, "late:ch")
	late.expect(t, pubsub.Message)
}

func TestCloseStopsEverything(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	m := pubsub.New(pubsub.Config{Redis: rdb})
	e := newEvents()
	m.Subscribe("x", e.fn)
	e.expect(t, pubsub.Subscribed)
	m.Close()
	m.Close()
	publish(t, srv, "x")
	e.quiet(t, 50*time.Millisecond)
	called := false
	m.Subscribe("y", func(pubsub.Event) { called = true })()
	if called {
		t.Fatal("listener called after Close")
	}
}
