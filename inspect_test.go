package holdfast_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
)

func TestInspectFreeAndHeld(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{ClientID: "svc1"})
	ctx := context.Background()

	info, err := c.Inspect(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(info, holdfast.Info{}) {
		t.Fatalf("free, never granted name: %+v, want the zero Info", info)
	}

	owned := holdfast.WithOwner(ctx, "job")
	outer := c.Lock(owned, "report", holdfast.WithLease(20*time.Second))
	mustAcquire(t, outer)
	inner := c.Lock(owned, "report", holdfast.WithLease(20*time.Second))
	mustAcquire(t, inner)

	info, err = c.Inspect(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	want := []holdfast.Holder{{Owner: holdfast.Field(c, "job"), Count: 2}}
	if info.Kind != holdfast.KindLock || !reflect.DeepEqual(info.Holders, want) {
		t.Fatalf("held name: kind %q holders %+v, want %q %+v", info.Kind, info.Holders, holdfast.KindLock, want)
	}
	if info.TTL <= 10*time.Second || info.TTL > 20*time.Second {
		t.Fatalf("TTL %v, want just under the 20s lease", info.TTL)
	}
	if info.Fence != outer.Token() || info.Fence == 0 {
		t.Fatalf("fence %d, want the holder's token %d", info.Fence, outer.Token())
	}
	if info.Waiters != 0 {
		t.Fatalf("waiters %d on a reentrant lock", info.Waiters)
	}

	inner.Release(ctx)
	outer.Release(ctx)
	info, err = c.Inspect(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != "" || info.Holders != nil || info.TTL != 0 || info.Fence != outer.Token() {
		t.Fatalf("released name: %+v, want free with fence %d", info, outer.Token())
	}
}

// ForceUnlock removes a live holder: its next renewal finds its field gone and
// its Lock ends with ErrNotOwner; the fence rises past its token.
func TestForceUnlockEndsTheHolder(t *testing.T) {
	srv := redistest.Start(t)
	holder := newClient(t, srv, holdfast.Config{WatchdogTimeout: 600 * time.Millisecond})
	ops := newClient(t, srv, holdfast.Config{})
	ctx := context.Background()

	l := holder.Lock(ctx, "stuck")
	mustAcquire(t, l)
	if err := ops.ForceUnlock(ctx, "stuck"); err != nil {
		t.Fatal(err)
	}
	info, err := ops.Inspect(ctx, "stuck")
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != "" || info.Fence != l.Token()+1 {
		t.Fatalf("after ForceUnlock: %+v, want free with fence %d", info, l.Token()+1)
	}
	// The watchdog renews every 200ms: the holder hears within a renewal or two.
	select {
	case <-l.Lost:
	case <-time.After(2 * time.Second):
		t.Fatal("the holder still believes it holds the name 2s after ForceUnlock")
	}
	if !errors.Is(l.Err(), holdfast.ErrNotOwner) {
		t.Fatalf("holder ended with %v, want ErrNotOwner", l.Err())
	}
}

// ForceUnlock wakes a waiter of another process through pub/sub: the holder's
// lease is 30s, so the waiter's PTTL-bounded sleep cannot explain a prompt
// grant. The waiter's token is above the fence the force-unlock raised.
func TestForceUnlockWakesWaiters(t *testing.T) {
	srv := redistest.Start(t)
	holder := newClient(t, srv, holdfast.Config{})
	waiter := newClient(t, srv, holdfast.Config{})
	ops := newClient(t, srv, holdfast.Config{})
	ctx := context.Background()

	l := holder.Lock(ctx, "queue", holdfast.WithLease(30*time.Second))
	mustAcquire(t, l)
	w := waiter.Lock(ctx, "queue")
	select {
	case <-w.Acquired:
		t.Fatal("waiter acquired a held name")
	case <-time.After(300 * time.Millisecond): // the waiter has tried and subscribed
	}
	start := time.Now()
	if err := ops.ForceUnlock(ctx, "queue"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Acquired:
	case <-w.Lost:
		t.Fatalf("waiter lost: %v", w.Err())
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken 5s after ForceUnlock (the holder's lease is 30s)")
	}
	t.Logf("waiter granted %v after ForceUnlock", time.Since(start))
	if w.Token() != l.Token()+2 {
		t.Fatalf("waiter's token %d, want %d (old %d, +1 force-unlock, +1 grant)", w.Token(), l.Token()+2, l.Token())
	}
}

func TestForceUnlockFreeNameChangesNothing(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{})
	ctx := context.Background()
	l := c.Lock(ctx, "idle")
	mustAcquire(t, l)
	l.Release(ctx)
	before := srv.Keys(t)
	if err := c.ForceUnlock(ctx, "idle"); err != nil {
		t.Fatal(err)
	}
	info, err := c.Inspect(ctx, "idle")
	if err != nil {
		t.Fatal(err)
	}
	if info.Fence != l.Token() {
		t.Fatalf("fence %d after ForceUnlock of a free name, want %d", info.Fence, l.Token())
	}
	if after := srv.Keys(t); !reflect.DeepEqual(before, after) {
		t.Fatalf("keys %v became %v", before, after)
	}
}

func TestNames(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{})
	ctx := context.Background()
	var locks []*holdfast.Lock
	for _, n := range []string{"job:1", "job:2", "report", "we}ird"} {
		l := c.Lock(ctx, n)
		mustAcquire(t, l)
		locks = append(locks, l)
	}
	for _, tc := range []struct {
		pattern string
		want    []string
	}{
		{"", []string{"job:1", "job:2", "report", "we}ird"}},
		{"job:*", []string{"job:1", "job:2"}},
		{"rep?rt", []string{"report"}},
		{"none*", []string{}},
	} {
		got, err := c.Names(ctx, tc.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Names(%q) = %q, want %q", tc.pattern, got, tc.want)
		}
	}
	locks[0].Release(ctx)
	if got, _ := c.Names(ctx, "job:*"); !reflect.DeepEqual(got, []string{"job:2"}) {
		t.Fatalf("after releasing job:1: %q", got)
	}
}

func TestInspectBadInput(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv, holdfast.Config{})
	ctx := context.Background()
	if _, err := c.Inspect(ctx, ""); !errors.Is(err, holdfast.ErrInvalidName) {
		t.Errorf("Inspect of an empty name: %v", err)
	}
	if err := c.ForceUnlock(ctx, "}x"); !errors.Is(err, holdfast.ErrInvalidName) {
		t.Errorf("ForceUnlock of a bad name: %v", err)
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if _, err := c.Inspect(nil, "x"); !errors.Is(err, holdfast.ErrInvalidOption) { //nolint:staticcheck
		t.Errorf("Inspect with a nil context: %v", err)
	}
	var zero holdfast.Client
	if _, err := zero.Names(ctx, ""); !errors.Is(err, holdfast.ErrInvalidOption) {
		t.Errorf("Names on a zero Client: %v", err)
	}
}

// The fair lock: Inspect shows its holder and its queue; ForceUnlock grants
// it to the queued waiter at once (the holder's lease is 30s and the
// waiter's keep-alive period WaiterTimeout/3 is over 6s, so only the grant
// message explains a prompt grant), with the fence raised.
func TestInspectAndForceUnlockFair(t *testing.T) {
	srv := redistest.Start(t)
	holder := newClient(t, srv, holdfast.Config{ClientID: "holder"})
	waiter := newClient(t, srv, holdfast.Config{ClientID: "waiter", WaiterTimeout: 20 * time.Second})
	ops := newClient(t, srv, holdfast.Config{})
	ctx := context.Background()

	l := holder.FairLock(holdfast.WithOwner(ctx, "job"), "fq", holdfast.WithLease(30*time.Second))
	mustAcquire(t, l)
	w := waiter.FairLock(holdfast.WithOwner(ctx, "next"), "fq")
	var info holdfast.Info
	deadline := time.Now().Add(waitFor)
	for info.Waiters == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the waiter never showed in the queue: %+v", info)
		}
		time.Sleep(10 * time.Millisecond)
		var err error
		if info, err = ops.Inspect(ctx, "fq"); err != nil {
			t.Fatal(err)
		}
	}
	want := []holdfast.Holder{{Owner: holdfast.Field(holder, "job"), Count: 1}}
	if info.Kind != holdfast.KindFair || !reflect.DeepEqual(info.Holders, want) || info.Waiters != 1 ||
		info.Fence != l.Token() || info.TTL <= 20*time.Second || info.TTL > 30*time.Second {
		t.Fatalf("held fair lock with one waiter: %+v, want kind fair, holders %+v, 1 waiter, fence %d, TTL near 30s", info, want, l.Token())
	}

	start := time.Now()
	if err := ops.ForceUnlock(ctx, "fq"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Acquired:
	case <-w.Lost:
		t.Fatalf("waiter lost: %v", w.Err())
	case <-time.After(5 * time.Second):
		t.Fatal("fair waiter not granted 5s after ForceUnlock")
	}
	t.Logf("fair waiter granted %v after ForceUnlock", time.Since(start))
	if w.Token() != l.Token()+2 {
		t.Fatalf("waiter's token %d, want %d (old %d, +1 force-unlock, +1 grant)", w.Token(), l.Token()+2, l.Token())
	}
	info, err := ops.Inspect(ctx, "fq")
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != holdfast.KindFair || len(info.Holders) != 1 || info.Holders[0] != (holdfast.Holder{Owner: holdfast.Field(waiter, "next"), Count: 1}) || info.Waiters != 0 {
		t.Fatalf("after the grant: %+v", info)
	}
	if names, _ := ops.Names(ctx, "f*"); !reflect.DeepEqual(names, []string{"fq"}) {
		t.Fatalf("Names lists %q, want the fair lock fq", names)
	}
}

// A fair holder whose hold was forced away ends with Lost at its next
// renewal, as a reentrant one does.
func TestForceUnlockFairEndsTheHolder(t *testing.T) {
	srv := redistest.Start(t)
	holder := newClient(t, srv, holdfast.Config{WatchdogTimeout: 600 * time.Millisecond})
	ops := newClient(t, srv, holdfast.Config{})
	ctx := context.Background()
	l := holder.FairLock(ctx, "fstuck")
	mustAcquire(t, l)
	if err := ops.ForceUnlock(ctx, "fstuck"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost:
	case <-time.After(2 * time.Second):
		t.Fatal("the fair holder still believes it holds the name 2s after ForceUnlock")
	}
	if !errors.Is(l.Err(), holdfast.ErrNotOwner) {
		t.Fatalf("holder ended with %v, want ErrNotOwner", l.Err())
	}
	if info, err := ops.Inspect(ctx, "fstuck"); err != nil || info.Kind != "" || info.Fence != l.Token()+1 {
		t.Fatalf("after ForceUnlock: %+v, %v; want free with fence %d", info, err, l.Token()+1)
	}
}
