package redissontest

import (
	"testing"
	"time"

	"github.com/holdfast/holdfast/internal/redistest"
)

// TestFairLockLineAndDeadlines: RFairLock's keys as Redisson writes them:
// waiters queue in the list in arrival order, each deadline its
// predecessor's plus the wait (the first: the holder's PTTL plus the
// wait); a grant from the line takes the grantee's wait off every deadline
// left; a tryLock that times out leaves the line; the unlock tells the
// head on its own channel, which grants it.
func TestFairLockLineAndDeadlines(t *testing.T) {
	s := redistest.Start(t)
	ctx := ctxFor(t)
	const wait = 10 * time.Second
	a := newClient(t, s, idA, WithFairLockWaitTimeout(wait))
	if err := a.FairLock(ctx, "f", 1, 60000); err != nil {
		t.Fatal(err)
	}
	before := time.Now().UnixMilli()
	for thread := int64(2); thread <= 3; thread++ {
		if ok, _, err := a.FairTryAcquire(ctx, "f", thread, 0, -1); ok || err != nil {
			t.Fatalf("thread %d: %v, %v", thread, ok, err)
		}
	}
	line, err := s.Do(t, "LRANGE", FairQueueKey("f"), "0", "-1").AsStrSlice()
	if err != nil || len(line) != 2 || line[0] != LockField(idA, 2) || line[1] != LockField(idA, 3) {
		t.Fatalf("line %v, %v", line, err)
	}
	score := func(thread int64) int64 {
		t.Helper()
		f, err := s.Do(t, "ZSCORE", FairTimeoutKey("f"), LockField(idA, thread)).AsFloat64()
		if err != nil {
			t.Fatal(err)
		}
		return int64(f)
	}
	d2, d3 := score(2), score(3)
	if d2 < before+60000+wait.Milliseconds()-1000 || d2 > time.Now().UnixMilli()+60000+wait.Milliseconds() {
		t.Fatalf("first deadline %d, want about now + PTTL + wait", d2-before)
	}
	if d3-d2 != wait.Milliseconds() {
		t.Fatalf("second deadline %dms after the first, want the wait", d3-d2)
	}
	// A tryLock that gives up leaves the line; nobody behind it here.
	if ok, err := a.FairTryLock(ctx, "f", 4, 50, -1); ok || err != nil {
		t.Fatalf("tryLock: %v, %v", ok, err)
	}
	if n, _ := s.Do(t, "LLEN", FairQueueKey("f")).AsInt64(); n != 2 {
		t.Fatalf("line of %d after a tryLock gave up, want 2", n)
	}
	got := make(chan error, 1)
	go func() { got <- a.FairLock(ctx, "f", 2, -1) }()
	time.Sleep(100 * time.Millisecond)
	released := time.Now()
	if err := a.FairUnlock(ctx, "f", 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(released); d > 2*time.Second {
			t.Fatalf("head granted %v after the unlock", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the head was not woken")
	}
	if score(3) != d3-wait.Milliseconds() {
		t.Fatalf("deadline after the grant %d, want %d", score(3), d3-wait.Milliseconds())
	}
	if err := a.FairUnlock(ctx, "f", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := a.FairForceUnlock(ctx, "f"); err != nil {
		t.Fatal(err)
	}
}
