package redissontest

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/redis/rueidis"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	idA = "6f1b2c3d-0000-4000-8000-00000000000a"
	idB = "6f1b2c3d-0000-4000-8000-00000000000b"
)

func ctxFor(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newClient makes a Client on its own rueidis connection to s.
func newClient(t *testing.T, s *redistest.Server, id string, opts ...Option) *Client {
	t.Helper()
	c := New(s.Client(t), id, opts...)
	t.Cleanup(c.Close)
	return c
}

func pttl(t *testing.T, s *redistest.Server, key string) int64 {
	t.Helper()
	n, err := s.Do(t, "PTTL", key).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func hgetall(t *testing.T, s *redistest.Server, key string) map[string]string {
	t.Helper()
	m, err := s.Do(t, "HGETALL", key).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func exists(t *testing.T, s *redistest.Server, key string) bool {
	t.Helper()
	n, err := s.Do(t, "EXISTS", key).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// waitSubscribers waits until channel has n subscribers.
func waitSubscribers(t *testing.T, s *redistest.Server, channel string, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		arr, err := s.Do(t, "PUBSUB", "NUMSUB", channel).ToArray()
		if err != nil {
			t.Fatal(err)
		}
		got, _ := arr[1].AsInt64()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d subscribers, want %d", channel, got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// listen subscribes to channel and collects its messages.
type listener struct {
	mu   sync.Mutex
	msgs []string
}

func listen(t *testing.T, s *redistest.Server, channel string) *listener {
	t.Helper()
	l := &listener{}
	rdb := s.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	var once sync.Once
	done := make(chan struct{})
	go func() {
		defer close(done)
		rdb.Receive(rueidis.WithOnSubscriptionHook(ctx, func(rueidis.PubSubSubscription) { once.Do(func() { close(ready) }) }),
			rdb.B().Subscribe().Channel(channel).Build(), func(m rueidis.PubSubMessage) {
				l.mu.Lock()
				l.msgs = append(l.msgs, m.Message)
				l.mu.Unlock()
			})
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		t.Fatal("listener did not subscribe")
	}
	return l
}

func (l *listener) wait(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		l.mu.Lock()
		got := strings.Join(l.msgs, ",")
		l.mu.Unlock()
		if got == strings.Join(want, ",") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("messages %q, want %q", got, strings.Join(want, ","))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{LockChannel("orders:42"), "redisson_lock__channel:{orders:42}"},
		{LockChannel("{orders}:42"), "redisson_lock__channel:{orders}:42"},
		{RWLockChannel("doc"), "redisson_rwlock:{doc}"},
		{RWLockChannel("a{b}c"), "redisson_rwlock:a{b}c"},
		{TokenKey("doc"), "redisson_lock_token:{doc}"},
		{UnlockLatchKey("doc", "ab12"), "redisson_unlock_latch:{doc}:ab12"},
		{LockField(idA, 7), idA + ":7"},
		{WriteField(idA, 7), idA + ":7:write"},
		{ReadTimeoutPrefix("doc", idA, 7), "{doc}:" + idA + ":7:rwlock_timeout"},
		{ReadTimeoutPrefix("{app}:doc", idA, 7), "{app}:doc:" + idA + ":7:rwlock_timeout"},
		{ReadTimeoutKey("doc", idA, 7, 2), "{doc}:" + idA + ":7:rwlock_timeout:2"},
		{ReadKeyPrefix("doc"), "{doc}"},
		{ReadKeyPrefix("{app}:doc"), "{app}:doc"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	if UnlockMessage != 0 || ReadUnlockMessage != 1 {
		t.Error("messages")
	}
	err := (&IllegalMonitorStateError{ID: idA, Thread: 3}).Error()
	if err != "attempt to unlock lock, not locked by current thread by node id: "+idA+" thread-id: 3" {
		t.Error(err)
	}
}

func TestLockKeyspace(t *testing.T) {
	s := redistest.Start(t)
	a := newClient(t, s, idA)
	ctx := ctxFor(t)

	if err := a.Lock(ctx, "wd", 1, -1); err != nil {
		t.Fatal(err)
	}
	if m := hgetall(t, s, "wd"); len(m) != 1 || m[idA+":1"] != "1" {
		t.Fatalf("hash %v", m)
	}
	if p := pttl(t, s, "wd"); p <= 29000 || p > 30000 {
		t.Fatalf("watchdog lease PTTL %d", p)
	}
	if err := a.Lock(ctx, "leased", 1, 5000); err != nil {
		t.Fatal(err)
	}
	if p := pttl(t, s, "leased"); p <= 4000 || p > 5000 {
		t.Fatalf("lease PTTL %d", p)
	}
	// Reentry with the watchdog uses the object's internalLockLeaseTime,
	// which the leased grant set to 5000.
	if err := a.Lock(ctx, "leased", 1, -1); err != nil {
		t.Fatal(err)
	}
	if p := pttl(t, s, "leased"); p <= 4000 || p > 5000 {
		t.Fatalf("reentrant PTTL %d", p)
	}
	if ok, _ := a.IsLocked(ctx, "wd"); !ok {
		t.Fatal("IsLocked false")
	}
	if ok, _ := a.IsHeldByThread(ctx, "wd", 2); ok {
		t.Fatal("held by thread 2")
	}
	if ok, _ := a.IsHeldByThread(ctx, "wd", 1); !ok {
		t.Fatal("not held by thread 1")
	}
	for _, name := range []string{"wd", "leased", "leased"} {
		if err := a.Unlock(ctx, name, 1); err != nil {
			t.Fatal(err)
		}
	}
	if keys := s.Keys(t); len(keys) != 0 {
		t.Fatalf("keys left: %v (unlock latches are deleted)", keys)
	}
}

func TestExclusionBetweenClients(t *testing.T) {
	s := redistest.Start(t)
	a, b := newClient(t, s, idA), newClient(t, s, idB)
	ctx := ctxFor(t)

	if err := a.Lock(ctx, "x", 1, -1); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ok, err := b.TryLock(ctx, "x", 1, 200, -1)
	if err != nil || ok {
		t.Fatalf("B got the lock A holds: %v %v", ok, err)
	}
	if d := time.Since(start); d < 190*time.Millisecond {
		t.Fatalf("TryLock gave up after %v, before its 200 ms", d)
	}
	if ok, _ := b.TryLock(ctx, "x", 1, -1, -1); ok {
		t.Fatal("B got the lock A holds")
	}
	// Another thread of the same client is excluded too.
	if ok, _ := a.TryLock(ctx, "x", 2, 0, -1); ok {
		t.Fatal("thread 2 got thread 1's lock")
	}
	if err := a.Unlock(ctx, "x", 1); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.TryLock(ctx, "x", 1, 0, -1); !ok || err != nil {
		t.Fatalf("B could not take the free lock: %v", err)
	}
	if ok, _ := a.TryLock(ctx, "x", 1, 0, -1); ok {
		t.Fatal("A got the lock B holds")
	}
}

func TestReentryCounts(t *testing.T) {
	s := redistest.Start(t)
	a, b := newClient(t, s, idA), newClient(t, s, idB)
	ctx := ctxFor(t)

	for i := 0; i < 3; i++ {
		if err := a.Lock(ctx, "r", 1, 10000); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := a.HoldCount(ctx, "r", 1); n != 3 {
		t.Fatalf("hold count %d", n)
	}
	if m := hgetall(t, s, "r"); m[idA+":1"] != "3" {
		t.Fatalf("hash %v", m)
	}
	// An unlock by another client's thread is refused and changes nothing.
	var ims *IllegalMonitorStateError
	if err := b.Unlock(ctx, "r", 1); !errors.As(err, &ims) || ims.ID != idB || ims.Thread != 1 {
		t.Fatalf("foreign unlock: %v", err)
	}
	s.Do(t, "PEXPIRE", "r", "3000")
	if err := a.Unlock(ctx, "r", 1); err != nil {
		t.Fatal(err)
	}
	if n, _ := a.HoldCount(ctx, "r", 1); n != 2 {
		t.Fatalf("hold count %d", n)
	}
	// A remaining hold's lease is reset to internalLockLeaseTime (10000).
	if p := pttl(t, s, "r"); p <= 9000 {
		t.Fatalf("PTTL after partial unlock %d", p)
	}
	a.Unlock(ctx, "r", 1)
	a.Unlock(ctx, "r", 1)
	if exists(t, s, "r") {
		t.Fatal("lock left after the last unlock")
	}
	if n, _ := a.HoldCount(ctx, "r", 1); n != 0 {
		t.Fatalf("hold count %d", n)
	}
	if err := a.Unlock(ctx, "r", 1); !errors.As(err, &ims) {
		t.Fatalf("unlock of a free lock: %v", err)
	}
}

func TestWaiterWakesOnUnlockMessage(t *testing.T) {
	s := redistest.Start(t)
	a, b := newClient(t, s, idA), newClient(t, s, idB)
	ctx := ctxFor(t)
	msgs := listen(t, s, LockChannel("w"))

	if err := a.Lock(ctx, "w", 1, 20000); err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Time, 1)
	go func() {
		if err := b.Lock(ctx, "w", 5, -1); err != nil {
			t.Error(err)
		}
		got <- time.Now()
	}()
	waitSubscribers(t, s, LockChannel("w"), 2) // the listener and B
	released := time.Now()
	if err := a.Unlock(ctx, "w", 1); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-got:
		if d := at.Sub(released); d > time.Second {
			t.Fatalf("B took %v to get the released lock (its TTL was 20 s)", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("B never got the released lock")
	}
	msgs.wait(t, "0")
	if m := hgetall(t, s, "w"); m[idB+":5"] != "1" || len(m) != 1 {
		t.Fatalf("hash %v", m)
	}
	// B unsubscribed once it held the lock.
	waitSubscribers(t, s, LockChannel("w"), 1)
}

func TestWaiterRetriesAtTTL(t *testing.T) {
	s := redistest.Start(t)
	a, b := newClient(t, s, idA), newClient(t, s, idB)
	ctx := ctxFor(t)

	if err := a.Lock(ctx, "t", 1, 300); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := b.Lock(ctx, "t", 1, -1); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 3*time.Second {
		t.Fatalf("B got the lock after %v; A's lease of 300 ms expired without a message", d)
	}
}

func TestTryLockWaitsForMessage(t *testing.T) {
	s := redistest.Start(t)
	a, b := newClient(t, s, idA), newClient(t, s, idB)
	ctx := ctxFor(t)

	if err := a.Lock(ctx, "tw", 1, 20000); err != nil {
		t.Fatal(err)
	}
	res := make(chan bool, 1)
	go func() {
		ok, err := b.TryLock(ctx, "tw", 1, 10000, 5000)
		if err != nil {
			t.Error(err)
		}
		res <- ok
	}()
	waitSubscribers(t, s, LockChannel("tw"), 1)
	start := time.Now()
	a.Unlock(ctx, "tw", 1)
	if ok := <-res; !ok || time.Since(start) > time.Second {
		t.Fatalf("TryLock: %v after %v", ok, time.Since(start))
	}
	if p := pttl(t, s, "tw"); p > 5000 || p < 4000 {
		t.Fatalf("B's lease PTTL %d", p)
	}
}

func TestWatchdogRenews(t *testing.T) {
	s := redistest.Start(t)
	a := newClient(t, s, idA, WithWatchdogTimeout(600*time.Millisecond))
	ctx := ctxFor(t)

	if err := a.Lock(ctx, "dog", 1, -1); err != nil {
		t.Fatal(err)
	}
	if err := a.Lock(ctx, "leased", 1, 400); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if p := pttl(t, s, "dog"); p <= 0 || p > 600 {
		t.Fatalf("watchdog lock PTTL %d after 1.5 s", p)
	}
	if exists(t, s, "leased") {
		t.Fatal("a leased lock was renewed")
	}
	if err := a.Unlock(ctx, "dog", 1); err != nil {
		t.Fatal(err)
	}
	a.locks.mu.Lock()
	running := a.locks.stop != nil
	a.locks.mu.Unlock()
	if running {
		t.Fatal("renewal still running after the unlock")
	}

	// A lock whose client stops (Close) is no longer renewed and expires.
	if err := a.Lock(ctx, "dog", 1, -1); err != nil {
		t.Fatal(err)
	}
	a.Close()
	time.Sleep(1000 * time.Millisecond)
	if exists(t, s, "dog") {
		t.Fatal("the lock of a closed client was renewed")
	}
}

// A renewal round that finds the field gone stops renewing it.
func TestWatchdogDropsLostLock(t *testing.T) {
	s := redistest.Start(t)
	a := newClient(t, s, idA, WithWatchdogTimeout(300*time.Millisecond))
	ctx := ctxFor(t)
	if err := a.Lock(ctx, "lost", 1, -1); err != nil {
		t.Fatal(err)
	}
	s.Do(t, "DEL", "lost")
	deadline := time.Now().Add(3 * time.Second)
	for {
		a.locks.mu.Lock()
		running := a.locks.stop != nil
		a.locks.mu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("renewal of a lost lock kept running")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestForceUnlock(t *testing.T) {
	s := redistest.Start(t)
	a, b := newClient(t, s, idA), newClient(t, s, idB)
	ctx := ctxFor(t)
	msgs := listen(t, s, LockChannel("f"))

	if ok, err := b.ForceUnlock(ctx, "f"); ok || err != nil {
		t.Fatalf("forceUnlock of a free lock: %v %v", ok, err)
	}
	a.Lock(ctx, "f", 1, -1)
	a.Lock(ctx, "f", 1, -1)
	done := make(chan time.Time, 1)
	go func() {
		b.Lock(ctx, "f", 1, -1)
		done <- time.Now()
	}()
	waitSubscribers(t, s, LockChannel("f"), 2)
	start := time.Now()
	if ok, err := a.ForceUnlock(ctx, "f"); !ok || err != nil {
		t.Fatalf("forceUnlock: %v %v", ok, err)
	}
	if at := <-done; at.Sub(start) > time.Second {
		t.Fatalf("waiter took %v after forceUnlock", at.Sub(start))
	}
	msgs.wait(t, "0")
	// forceUnlock stopped A's watchdog for the name.
	a.locks.mu.Lock()
	_, renewing := a.locks.entries["f"]
	a.locks.mu.Unlock()
	if renewing {
		t.Fatal("A still renews a force-unlocked name")
	}
	if m := hgetall(t, s, "f"); m[idB+":1"] != "1" {
		t.Fatalf("hash %v", m)
	}
}

func TestFencedTokens(t *testing.T) {
	s := redistest.Start(t)
	a, b := newClient(t, s, idA), newClient(t, s, idB)
	ctx := ctxFor(t)

	if _, ok, _ := a.FencedToken(ctx, "fl"); ok {
		t.Fatal("token before any grant")
	}
	tok, err := a.LockFenced(ctx, "fl", 1, -1)
	if err != nil || tok != 1 {
		t.Fatalf("first token %d %v", tok, err)
	}
	tok, _ = a.LockFenced(ctx, "fl", 1, -1) // reentry INCRs too
	if tok != 2 {
		t.Fatalf("reentrant token %d", tok)
	}
	if tok, ok, err := b.TryLockFenced(ctx, "fl", 1, 100, -1); ok || err != nil {
		t.Fatalf("B got %d", tok)
	}
	if tok, ok, _ := a.FencedToken(ctx, "fl"); !ok || tok != 2 {
		t.Fatalf("getToken %d", tok)
	}
	if p := pttl(t, s, TokenKey("fl")); p != -1 {
		t.Fatalf("token counter PTTL %d", p)
	}
	got := make(chan int64, 1)
	go func() {
		tok, _ := b.LockFenced(ctx, "fl", 1, -1)
		got <- tok
	}()
	waitSubscribers(t, s, LockChannel("fl"), 1)
	a.Unlock(ctx, "fl", 1)
	a.Unlock(ctx, "fl", 1)
	if tok := <-got; tok != 3 {
		t.Fatalf("B's token %d", tok)
	}
	b.Unlock(ctx, "fl", 1)
	if err := a.LockFencedNoToken(ctx, "fl", 1, 1000); err != nil {
		t.Fatal(err)
	}
	if tok, _, _ := a.FencedToken(ctx, "fl"); tok != 4 {
		t.Fatalf("lock() did not INCR: %d", tok)
	}
	a.Unlock(ctx, "fl", 1)
	if !exists(t, s, TokenKey("fl")) || exists(t, s, "fl") {
		t.Fatal("unlock must delete the hash and keep the counter")
	}
}

func TestReadersShare(t *testing.T) {
	s := redistest.Start(t)
	a, b := newClient(t, s, idA), newClient(t, s, idB)
	ctx := ctxFor(t)

	if err := a.ReadLock(ctx, "rw", 1, 10000); err != nil {
		t.Fatal(err)
	}
	if err := b.ReadLock(ctx, "rw", 1, 10000); err != nil {
		t.Fatal(err)
	}
	if err := b.ReadLock(ctx, "rw", 1, 10000); err != nil {
		t.Fatal(err)
	}
	m := hgetall(t, s, "rw")
	if m["mode"] != "read" || m[idA+":1"] != "1" || m[idB+":1"] != "2" || len(m) != 3 {
		t.Fatalf("hash %v", m)
	}
	for _, k := range []string{ReadTimeoutKey("rw", idA, 1, 1), ReadTimeoutKey("rw", idB, 1, 1), ReadTimeoutKey("rw", idB, 1, 2)} {
		if p := pttl(t, s, k); p <= 9000 || p > 10000 {
			t.Fatalf("%s PTTL %d", k, p)
		}
	}
	if ok, _ := a.IsReadLocked(ctx, "rw"); !ok {
		t.Fatal("IsReadLocked false")
	}
	if ok, _ := b.TryWriteLock(ctx, "rw", 2, 100, -1); ok {
		t.Fatal("a writer got a read-locked lock")
	}
	// A reader may not upgrade.
	if ok, _ := a.TryWriteLock(ctx, "rw", 1, 0, -1); ok {
		t.Fatal("a reader upgraded")
	}
	b.ReadUnlock(ctx, "rw", 1)
	if exists(t, s, ReadTimeoutKey("rw", idB, 1, 2)) || !exists(t, s, ReadTimeoutKey("rw", idB, 1, 1)) {
		t.Fatal("unlock must delete the newest timeout key only")
	}
	// The hash now lives as long as the longest reader timeout key.
	s.Do(t, "PEXPIRE", ReadTimeoutKey("rw", idA, 1, 1), "60000")
	b.ReadUnlock(ctx, "rw", 1)
	if p := pttl(t, s, "rw"); p <= 59000 {
		t.Fatalf("hash PTTL %d, want the longest reader's", p)
	}
	var ims *IllegalMonitorStateError
	if err := b.ReadUnlock(ctx, "rw", 1); !errors.As(err, &ims) {
		t.Fatalf("unlock of a read lock not held: %v", err)
	}

	w := make(chan time.Time, 1)
	go func() {
		b.WriteLock(ctx, "rw", 2, -1)
		w <- time.Now()
	}()
	waitSubscribers(t, s, RWLockChannel("rw"), 1)
	msgs := listen(t, s, RWLockChannel("rw"))
	start := time.Now()
	if err := a.ReadUnlock(ctx, "rw", 1); err != nil {
		t.Fatal(err)
	}
	if at := <-w; at.Sub(start) > time.Second {
		t.Fatalf("writer took %v after the last reader left", at.Sub(start))
	}
	msgs.wait(t, "0")
	m = hgetall(t, s, "rw")
	if m["mode"] != "write" || m[idB+":2:write"] != "1" || len(m) != 2 {
		t.Fatalf("hash %v", m)
	}
}

func TestWriterExcludesAndWakesAllReaders(t *testing.T) {
	s := redistest.Start(t)
	a, b, c := newClient(t, s, idA), newClient(t, s, idB), newClient(t, s, "6f1b2c3d-0000-4000-8000-00000000000c")
	ctx := ctxFor(t)
	msgs := listen(t, s, RWLockChannel("doc"))

	if err := a.WriteLock(ctx, "doc", 1, 20000); err != nil {
		t.Fatal(err)
	}
	if ok, _ := b.TryReadLock(ctx, "doc", 1, 50, -1); ok {
		t.Fatal("a reader got a write-locked lock")
	}
	if ok, _ := a.TryWriteLock(ctx, "doc", 2, 0, -1); ok {
		t.Fatal("another thread got the write lock")
	}
	var wg sync.WaitGroup
	times := make(chan time.Time, 3)
	for _, r := range []struct {
		c *Client
		t int64
	}{{b, 1}, {b, 2}, {c, 1}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.c.ReadLock(ctx, "doc", r.t, -1); err != nil {
				t.Error(err)
			}
			times <- time.Now()
		}()
	}
	waitSubscribers(t, s, RWLockChannel("doc"), 3) // listener, b (shared by its threads), c
	// Let both of b's threads reach the latch.
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if err := a.WriteUnlock(ctx, "doc", 1); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(times)
	for at := range times {
		if at.Sub(start) > time.Second {
			t.Fatalf("a reader took %v after the write unlock", at.Sub(start))
		}
	}
	msgs.wait(t, "1")
	m := hgetall(t, s, "doc")
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if m["mode"] != "read" || len(m) != 4 {
		t.Fatalf("hash %v", keys)
	}
}

func TestWriterReadsAndDowngrades(t *testing.T) {
	s := redistest.Start(t)
	a, b := newClient(t, s, idA), newClient(t, s, idB)
	ctx := ctxFor(t)

	if err := a.WriteLock(ctx, "d", 1, 1000); err != nil {
		t.Fatal(err)
	}
	// A reentrant write grant adds its lease to the PTTL.
	if err := a.WriteLock(ctx, "d", 1, 1000); err != nil {
		t.Fatal(err)
	}
	if p := pttl(t, s, "d"); p <= 1500 || p > 2000 {
		t.Fatalf("reentrant write PTTL %d", p)
	}
	if n, _ := a.WriteHoldCount(ctx, "d", 1); n != 2 {
		t.Fatalf("write holds %d", n)
	}
	a.WriteUnlock(ctx, "d", 1)
	if p := pttl(t, s, "d"); p <= 900 || p > 1000 {
		t.Fatalf("PTTL after partial write unlock %d", p)
	}
	if ok, _ := a.IsReadLocked(ctx, "d"); ok {
		t.Fatal("IsReadLocked with the writer alone")
	}
	if err := a.ReadLock(ctx, "d", 1, 10000); err != nil {
		t.Fatal(err)
	}
	if ok, _ := a.IsReadLocked(ctx, "d"); !ok {
		t.Fatal("IsReadLocked false with the writer reading")
	}
	if ok, _ := a.IsWriteLocked(ctx, "d"); !ok {
		t.Fatal("IsWriteLocked false")
	}
	if ok, _ := b.TryReadLock(ctx, "d", 1, 0, -1); ok {
		t.Fatal("another client read while written")
	}
	msgs := listen(t, s, RWLockChannel("d"))
	if err := a.WriteUnlock(ctx, "d", 1); err != nil {
		t.Fatal(err)
	}
	m := hgetall(t, s, "d")
	if m["mode"] != "read" || m[idA+":1"] != "1" || len(m) != 2 {
		t.Fatalf("hash after downgrade %v", m)
	}
	if ok, _ := b.TryReadLock(ctx, "d", 1, 0, -1); !ok {
		t.Fatal("no read after the downgrade")
	}
	if ok, _ := a.ForceWriteUnlock(ctx, "d"); ok {
		t.Fatal("force write unlock of a read-mode lock")
	}
	if ok, _ := a.ForceReadUnlock(ctx, "d"); !ok {
		t.Fatal("force read unlock failed")
	}
	msgs.wait(t, "0") // the downgrade published nothing
	if err := a.WriteUnlock(ctx, "d", 1); err == nil {
		t.Fatal("write unlock of a free lock succeeded")
	}
	msgs.wait(t, "0", "1") // ...but finding it free publishes
}

func TestReadWatchdog(t *testing.T) {
	s := redistest.Start(t)
	a := newClient(t, s, idA, WithWatchdogTimeout(600*time.Millisecond))
	b := newClient(t, s, idB)
	ctx := ctxFor(t)

	a.ReadLock(ctx, "rd", 1, -1)
	a.ReadLock(ctx, "rd", 1, -1)
	a.ReadLock(ctx, "rd", 2, -1)
	b.ReadLock(ctx, "rd", 1, 500)
	time.Sleep(1500 * time.Millisecond)
	for _, k := range []string{"rd", ReadTimeoutKey("rd", idA, 1, 1), ReadTimeoutKey("rd", idA, 1, 2), ReadTimeoutKey("rd", idA, 2, 1)} {
		if p := pttl(t, s, k); p <= 0 || p > 600 {
			t.Fatalf("%s PTTL %d after 1.5 s", k, p)
		}
	}
	// Since Redisson 4.4.0 a client renews only its own readers' keys.
	if exists(t, s, ReadTimeoutKey("rd", idB, 1, 1)) {
		t.Fatal("A renewed B's reader timeout")
	}
	a.ReadUnlock(ctx, "rd", 1)
	a.ReadUnlock(ctx, "rd", 1)
	a.ReadUnlock(ctx, "rd", 2)
	a.reads.mu.Lock()
	running := a.reads.stop != nil
	a.reads.mu.Unlock()
	if running {
		t.Fatal("read renewal still running")
	}
	if exists(t, s, "rd") {
		// B's field is left with its timeout key expired, so the last
		// unlock deleted the hash.
		t.Fatalf("hash left: %v", hgetall(t, s, "rd"))
	}
}

func TestBraceNames(t *testing.T) {
	s := redistest.Start(t)
	a := newClient(t, s, idA)
	ctx := ctxFor(t)
	msgs := listen(t, s, "redisson_lock__channel:{app}:x")

	a.Lock(ctx, "{app}:x", 1, -1)
	a.Unlock(ctx, "{app}:x", 1)
	msgs.wait(t, "0")

	a.ReadLock(ctx, "{app}:y", 1, 5000)
	if !exists(t, s, "{app}:y:"+idA+":1:rwlock_timeout:1") {
		t.Fatalf("keys %v", s.Keys(t))
	}
}

func TestUnlockLatchAnswersARetry(t *testing.T) {
	s := redistest.Start(t)
	a := newClient(t, s, idA)
	ctx := ctxFor(t)

	a.Lock(ctx, "l", 1, -1)
	a.Lock(ctx, "l", 1, -1)
	latch := UnlockLatchKey("l", "req1")
	for i := 0; i < 2; i++ { // the retry answers 0 again, not a second decrement
		held, released, err := plainUnlock(ctx, a, "l", 1, latch)
		if err != nil || !held || released {
			t.Fatalf("try %d: %v %v %v", i, held, released, err)
		}
	}
	if n, _ := a.HoldCount(ctx, "l", 1); n != 1 {
		t.Fatalf("hold count %d", n)
	}
	if p := pttl(t, s, latch); p <= 0 || p > DefaultUnlockLatchTimeoutMs {
		t.Fatalf("latch PTTL %d", p)
	}
	latch2 := UnlockLatchKey("l", "req2")
	for i := 0; i < 2; i++ {
		held, released, _ := plainUnlock(ctx, a, "l", 1, latch2)
		if !held || !released {
			t.Fatalf("try %d: %v %v", i, held, released)
		}
	}
	if v, _ := s.Do(t, "GET", latch2).ToString(); v != "1" {
		t.Fatalf("latch %q", v)
	}
}

func TestCloseEndsWaits(t *testing.T) {
	s := redistest.Start(t)
	a := newClient(t, s, idA)
	b := New(s.Client(t), idB)
	ctx := ctxFor(t)

	a.Lock(ctx, "c", 1, -1)
	errc := make(chan error, 1)
	go func() { errc <- b.Lock(ctx, "c", 1, -1) }()
	waitSubscribers(t, s, LockChannel("c"), 1)
	b.Close()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("wait in a closed client: %v", err)
	}
	waitSubscribers(t, s, LockChannel("c"), 0)
	if err := b.Lock(ctx, "c", 1, -1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Lock on a closed client: %v", err)
	}
}

func TestContextEndsWait(t *testing.T) {
	s := redistest.Start(t)
	a, b := newClient(t, s, idA), newClient(t, s, idB)
	ctx := ctxFor(t)

	a.Lock(ctx, "ctx", 1, -1)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := b.Lock(short, "ctx", 1, -1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock past its context: %v", err)
	}
	waitSubscribers(t, s, LockChannel("ctx"), 0)
}

// With sharded pub/sub the scripts SPUBLISH and waiters SSUBSCRIBE.
func TestShardedPubSubWakes(t *testing.T) {
	s := redistest.Start(t)
	a := newClient(t, s, idA, WithShardedPubSub())
	b := newClient(t, s, idB, WithShardedPubSub())
	ctx := ctxFor(t)

	a.Lock(ctx, "sh", 1, 20000)
	done := make(chan time.Time, 1)
	go func() {
		b.Lock(ctx, "sh", 1, -1)
		done <- time.Now()
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		arr, _ := s.Do(t, "PUBSUB", "SHARDNUMSUB", LockChannel("sh")).ToArray()
		if n, _ := arr[1].AsInt64(); n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no sharded subscriber")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	a.Unlock(ctx, "sh", 1)
	if at := <-done; at.Sub(start) > time.Second {
		t.Fatalf("sharded waiter took %v", at.Sub(start))
	}
}
