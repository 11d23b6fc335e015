package holdfast_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
)

// waitReplicated waits until replica's link to its primary is up and the
// replica has key.
func waitReplicated(t *testing.T, replica *redistest.Server, key string) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for time.Now().Before(deadline) {
		info, _ := replica.Do(t, "INFO", "replication").ToString()
		n, _ := replica.Do(t, "EXISTS", key).AsInt64()
		if strings.Contains(info, "master_link_status:up") && n == 1 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("replica %s never got %s", replica.Addr, key)
}

// A holder pinned to a primary that a failover demoted gets READONLY on its
// next renewal: it ends the hold at once with ErrFailover, instead of
// retrying until its deadline while the promoted replica may already have
// granted the lock elsewhere.
func TestDemotedPrimaryEndsHoldAtOnce(t *testing.T) {
	primary, replica := redistest.Start(t), redistest.Start(t)
	replica.Do(t, "REPLICAOF", "127.0.0.1", strconv.Itoa(primary.Port()))
	const lease = 3 * time.Second
	c := newClient(t, primary, holdfast.Config{WatchdogTimeout: lease})
	l := c.Lock(context.Background(), "promoted")
	mustAcquire(t, l)
	waitReplicated(t, replica, scripts.LockKey("promoted"))

	// The failover: the replica is promoted, the old primary follows it.
	replica.Do(t, "REPLICAOF", "NO", "ONE")
	primary.Do(t, "REPLICAOF", "127.0.0.1", strconv.Itoa(replica.Port()))
	demoted := time.Now()
	select {
	case <-l.Lost:
	case <-time.After(waitFor):
		t.Fatal("hold not lost after its node was demoted")
	}
	took := time.Since(demoted)
	t.Logf("Lost %v after the demotion (renewal every %v, deadline up to %v away): %v", took, lease/3, lease, l.Err())
	if !errors.Is(l.Err(), holdfast.ErrFailover) {
		t.Fatalf("ended with %v, want ErrFailover", l.Err())
	}
	if took > lease/3+lease/6 {
		t.Fatalf("Lost %v after the demotion: more than one renewal interval (%v) and margin, as if waiting for the deadline", took, lease/3)
	}
}

// blackhole is a TCP proxy to a Redis server that can stop answering: while
// cut, it keeps accepting and reading but forwards nothing either way, as a
// network partition that drops packets would.
type blackhole struct {
	ln     net.Listener
	target string
	cut    atomic.Bool
	wg     sync.WaitGroup

	mu    sync.Mutex // guards conns
	conns []net.Conn
}

func startBlackhole(t *testing.T, target string) *blackhole {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{ln: ln, target: target}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				down.Close()
				continue
			}
			b.mu.Lock()
			b.conns = append(b.conns, down, up)
			b.mu.Unlock()
			b.wg.Add(2)
			go b.pipe(up, down)
			go b.pipe(down, up)
		}
	}()
	t.Cleanup(b.close)
	return b
}

// pipe copies from src to dst, dropping what it reads while cut.
func (b *blackhole) pipe(dst, src net.Conn) {
	defer b.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !b.cut.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				dst.Close()
			}
			return
		}
	}
}

// heal ends the cut by dropping every connection (their streams lost
// bytes): clients reconnect.
func (b *blackhole) heal() {
	b.mu.Lock()
	for _, c := range b.conns {
		c.Close()
	}
	b.conns = nil
	b.mu.Unlock()
	b.cut.Store(false)
}

func (b *blackhole) close() {
	b.ln.Close()
	b.heal()
	b.wg.Wait()
}

// With Redis unreachable, WithWait(1s) gives up at its budget, not after
// CallTimeout: the acquire in flight is settled in the background.
func TestWaitBudgetBoundsUnansweredCall(t *testing.T) {
	srv := redistest.Start(t)
	hole := startBlackhole(t, srv.Addr)
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{hole.ln.Addr().String()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	const callTimeout = 4 * time.Second
	c, err := holdfast.New(holdfast.Config{Redis: rdb, CallTimeout: callTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	warm := c.Lock(context.Background(), "unreachable")
	mustAcquire(t, warm)
	if err := warm.Release(context.Background()); err != nil {
		t.Fatal(err)
	}

	hole.cut.Store(true)
	start := time.Now()
	l := c.Lock(context.Background(), "unreachable", holdfast.WithWait(time.Second))
	mustLose(t, l, holdfast.ErrWaitTimeout)
	took := time.Since(start)
	t.Logf("WithWait(1s) with Redis unreachable returned after %v (CallTimeout %v)", took, callTimeout)
	if took < time.Second || took > time.Second+callTimeout/4 {
		t.Fatalf("WithWait(1s) ended after %v; the budget is 1s, CallTimeout %v", took, callTimeout)
	}
	select {
	case <-l.Acquired:
		t.Fatal("Acquired closed for a Lock that gave up")
	default:
	}

	hole.heal()
	again := c.Lock(context.Background(), "unreachable")
	mustAcquire(t, again)
	if err := again.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}
