package holdfast_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
)

// Real-Redis tests of LockAll and RedLock.

func TestLockAllAllOrNothing(t *testing.T) {
	a, b := redistest.Start(t), redistest.Start(t)
	ca, cb := newClient(t, a, holdfast.Config{}), newClient(t, b, holdfast.Config{})
	other := newClient(t, b, holdfast.Config{})
	ctx := context.Background()

	b.Do(t, "SET", scripts.FenceKey("acct:2"), "10") // tell the two counters apart
	blocker := other.Lock(ctx, "acct:2")
	mustAcquire(t, blocker)
	targets := []holdfast.Target{{Client: ca, Name: "acct:1"}, {Client: cb, Name: "acct:2"}}
	l := holdfast.LockAll(ctx, targets, holdfast.WithWait(200*time.Millisecond))
	mustLose(t, l, holdfast.ErrWaitTimeout)
	select {
	case <-l.Acquired:
		t.Fatal("Acquired closed for a LockAll that never held every part")
	default:
	}
	// The part on a was released before Lost closed.
	noLockKeys(t, a)
	if !strings.Contains(l.Err().Error(), `"acct:2"`) {
		t.Fatalf("error does not name the refused part: %v", l.Err())
	}

	if err := blocker.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l = holdfast.LockAll(ctx, targets)
	mustAcquire(t, l)
	if got := len(lockKeys(t, a)) + len(lockKeys(t, b)); got != 2 {
		t.Fatalf("%d lock keys while LockAll holds two parts", got)
	}
	tokens := l.Tokens()
	// acct:1's counter: 1 for the first LockAll's part, given back; 2 now.
	// acct:2's: 11 for the blocker, 12 now.
	if len(tokens) != 2 || tokens[0] != 2 || tokens[1] != 12 || l.Token() != 2 {
		t.Fatalf("Tokens() = %v, Token() = %d, want [2 12] in the targets' order and 2", tokens, l.Token())
	}
	if d := l.Deadline(); d.IsZero() || !d.After(time.Now()) {
		t.Fatalf("Deadline %v is not in the future", d)
	}
	// A plain Lock on a part's name is excluded by the LockAll.
	probe := cb.Lock(ctx, "acct:2", holdfast.WithWait(0))
	mustLose(t, probe, holdfast.ErrWaitTimeout)
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	mustLose(t, l, holdfast.ErrReleased)
	noLockKeys(t, a)
	noLockKeys(t, b)
}

func TestLockAllCrossingOrdersFinish(t *testing.T) {
	a, b := redistest.Start(t), redistest.Start(t)
	ca, cb := newClient(t, a, holdfast.Config{}), newClient(t, b, holdfast.Config{})
	all := []holdfast.Target{{Client: ca, Name: "x"}, {Client: cb, Name: "y"}, {Client: ca, Name: "z"}}
	orders := [][]int{{0, 1, 2}, {2, 1, 0}, {1, 2, 0}}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		inside int
		errs   = make(chan error, len(orders))
	)
	for _, order := range orders {
		targets := make([]holdfast.Target, len(order))
		for i, j := range order {
			targets[i] = all[j]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				ctx, cancel := context.WithTimeout(context.Background(), waitFor)
				l := holdfast.LockAll(ctx, targets)
				err := l.Wait(ctx)
				if err != nil {
					cancel()
					errs <- fmt.Errorf("LockAll %v: %w", order, err)
					return
				}
				mu.Lock()
				inside++
				n := inside
				mu.Unlock()
				if n != 1 {
					errs <- fmt.Errorf("%d LockAlls over the same names hold at once", n)
				}
				mu.Lock()
				inside--
				mu.Unlock()
				err = l.Release(ctx)
				cancel()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	noLockKeys(t, a)
	noLockKeys(t, b)
}

func TestLockAllPartDeletedFiresLost(t *testing.T) {
	a, b := redistest.Start(t), redistest.Start(t)
	cfg := holdfast.Config{WatchdogTimeout: 300 * time.Millisecond}
	ca, cb := newClient(t, a, cfg), newClient(t, b, cfg)
	l := holdfast.LockAll(context.Background(), []holdfast.Target{{Client: ca, Name: "p"}, {Client: cb, Name: "q"}})
	mustAcquire(t, l)
	b.Do(t, "DEL", scripts.LockKey("q"))
	mustLose(t, l, holdfast.ErrNotOwner)
	if !strings.Contains(l.Err().Error(), `"q"`) {
		t.Fatalf("Err does not name the lost part: %v", l.Err())
	}
	noLockKeys(t, a) // the part still held was released before Lost closed
}

func TestLockAllPartLostWhileWaiting(t *testing.T) {
	a, b := redistest.Start(t), redistest.Start(t)
	cfg := holdfast.Config{WatchdogTimeout: 300 * time.Millisecond}
	ca, cb := newClient(t, a, cfg), newClient(t, b, cfg)
	ctx := context.Background()
	blocker := newClient(t, b, holdfast.Config{}).Lock(ctx, "q")
	mustAcquire(t, blocker)
	l := holdfast.LockAll(ctx, []holdfast.Target{{Client: ca, Name: "p"}, {Client: cb, Name: "q"}})
	// p is taken first (global order) and held while q is waited for.
	deadline := time.Now().Add(waitFor)
	for len(lockKeys(t, a)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("p never taken")
		}
		time.Sleep(5 * time.Millisecond)
	}
	a.Do(t, "DEL", scripts.LockKey("p"))
	mustLose(t, l, holdfast.ErrNotOwner)
	if !strings.Contains(l.Err().Error(), `"p"`) {
		t.Fatalf("Err does not name the lost part: %v", l.Err())
	}
	if err := blocker.Release(ctx); err != nil {
		t.Fatal(err)
	}
	noLockKeys(t, a)
	noLockKeys(t, b)
}

// TestLockAllPartServerDownEndsAtBudget: a part whose server does not
// answer cannot stretch the wait budget; the part that was taken is given
// back before Lost closes.
func TestLockAllPartServerDownEndsAtBudget(t *testing.T) {
	a, b := redistest.Start(t), redistest.Start(t)
	// The call timeout bounds how long the end waits for p's release: it
	// is generous, so that a loaded machine's slow answer from the live
	// server is still waited for.
	cfg := holdfast.Config{CallTimeout: time.Second}
	ca, cb := newClient(t, a, cfg), newClient(t, b, cfg)
	b.Kill()
	start := time.Now()
	l := holdfast.LockAll(context.Background(), []holdfast.Target{{Client: ca, Name: "p"}, {Client: cb, Name: "q"}},
		holdfast.WithWait(300*time.Millisecond))
	mustLose(t, l, holdfast.ErrWaitTimeout)
	t.Logf("Lost after %v: %v", time.Since(start).Round(time.Millisecond), l.Err())
	noLockKeys(t, a)
}

func TestLockAllBadInput(t *testing.T) {
	a := redistest.Start(t)
	c := newClient(t, a, holdfast.Config{})
	for _, tc := range []struct {
		name    string
		targets []holdfast.Target
		want    error
	}{
		{"none", nil, holdfast.ErrInvalidOption},
		{"nil client", []holdfast.Target{{Name: "x"}}, holdfast.ErrInvalidOption},
		{"twice", []holdfast.Target{{Client: c, Name: "x"}, {Client: c, Name: "x"}}, holdfast.ErrInvalidOption},
		{"bad name", []holdfast.Target{{Client: c, Name: ""}}, holdfast.ErrInvalidName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mustLose(t, holdfast.LockAll(context.Background(), tc.targets), tc.want)
		})
	}
	mustLose(t, holdfast.RedLock(context.Background(), nil, "x"), holdfast.ErrInvalidOption)
	//lint:ignore SA1012 a nil context is the bad input under test
	mustLose(t, holdfast.LockAll(nil, []holdfast.Target{{Client: c, Name: "x"}}), holdfast.ErrInvalidOption) //nolint:staticcheck
	mustLose(t, holdfast.RedLock(context.Background(), []*holdfast.Client{c}, "x", holdfast.WithWait(-1)), holdfast.ErrInvalidOption)
	noLockKeys(t, a)
}

// redlockClients starts n servers with one Client each.
func redlockClients(t *testing.T, n int, cfg holdfast.Config) ([]*redistest.Server, []*holdfast.Client) {
	srvs := make([]*redistest.Server, n)
	clients := make([]*holdfast.Client, n)
	for i := range srvs {
		srvs[i] = redistest.Start(t)
		clients[i] = newClient(t, srvs[i], cfg)
	}
	return srvs, clients
}

func TestRedLockOneOfThreeDown(t *testing.T) {
	srvs, clients := redlockClients(t, 3, holdfast.Config{WatchdogTimeout: 600 * time.Millisecond})
	_, others := func() ([]*redistest.Server, []*holdfast.Client) {
		cs := make([]*holdfast.Client, 3)
		for i, s := range srvs {
			cs[i] = newClient(t, s, holdfast.Config{})
		}
		return srvs, cs
	}()
	srvs[2].Kill()
	ctx := context.Background()
	l := holdfast.RedLock(ctx, clients, "ledger", holdfast.WithWait(5*time.Second))
	mustAcquire(t, l)
	if l.Token() == 0 || len(l.Tokens()) != 1 {
		t.Fatalf("Token %d, Tokens %v", l.Token(), l.Tokens())
	}
	// Renewed past several leases on the two live nodes.
	time.Sleep(1500 * time.Millisecond)
	notLost(t, l)
	if !l.Deadline().After(time.Now()) {
		t.Fatalf("deadline %v passed while held", l.Deadline())
	}
	rival := holdfast.RedLock(ctx, others, "ledger", holdfast.WithWait(300*time.Millisecond))
	mustLose(t, rival, holdfast.ErrNoQuorum)
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	noLockKeys(t, srvs[0])
	noLockKeys(t, srvs[1])
}

func TestRedLockTwoOfThreeDownNoQuorum(t *testing.T) {
	srvs, clients := redlockClients(t, 3, holdfast.Config{CallTimeout: 200 * time.Millisecond})
	srvs[1].Kill()
	srvs[2].Kill()
	start := time.Now()
	l := holdfast.RedLock(context.Background(), clients, "ledger", holdfast.WithWait(500*time.Millisecond))
	mustLose(t, l, holdfast.ErrNoQuorum)
	t.Logf("ErrNoQuorum after %v: %v", time.Since(start).Round(time.Millisecond), l.Err())
	noLockKeys(t, srvs[0]) // the live node's grant was given back
}

func TestRedLockTokenMonotoneAfterHighestNodeDown(t *testing.T) {
	srvs, clients := redlockClients(t, 3, holdfast.Config{})
	ctx := context.Background()
	srvs[2].Do(t, "SET", scripts.FenceKey("ledger"), "1000")
	// Node 1 is held elsewhere, so the first majority is {0, 2}: its token
	// is node 2's, and node 0's counter must be raised to it.
	blocker := newClient(t, srvs[1], holdfast.Config{}).Lock(ctx, "ledger")
	mustAcquire(t, blocker)
	first := holdfast.RedLock(ctx, clients, "ledger", holdfast.WithWait(5*time.Second))
	mustAcquire(t, first)
	if err := blocker.Release(ctx); err != nil {
		t.Fatal(err)
	}
	t1 := first.Token()
	if t1 <= 1000 {
		t.Fatalf("first token %d: the majority included the node at 1000, want > 1000", t1)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	srvs[2].Kill()
	second := holdfast.RedLock(ctx, clients, "ledger", holdfast.WithWait(5*time.Second))
	mustAcquire(t, second)
	t.Logf("tokens: %d then %d (node 2, at 1000, down for the second)", t1, second.Token())
	if second.Token() <= t1 {
		t.Fatalf("token went backwards: %d then %d", t1, second.Token())
	}
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
