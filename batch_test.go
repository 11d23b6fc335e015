package holdfast_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
)

// writeCounter counts the writes to its connections and the EVALSHA
// commands in them.
type writeCounter struct {
	writes, evalshas atomic.Int64
}

type countedConn struct {
	net.Conn
	c *writeCounter
}

func (cc countedConn) Write(p []byte) (int, error) {
	if n := bytes.Count(p, []byte("EVALSHA")); n > 0 {
		cc.c.writes.Add(1)
		cc.c.evalshas.Add(int64(n))
	}
	return cc.Conn.Write(p)
}

// TestConcurrentCallsGoOutTogether: the script calls of many goroutines
// cycling locks at once leave in batches — several EVALSHAs per write to
// the connection — not one write per call (rueidis alone wrote about 1.1
// per write for the actors' calls), and survive the server
// forgetting the scripts between two rounds.
func TestConcurrentCallsGoOutTogether(t *testing.T) {
	srv := redistest.Start(t)
	var ctr writeCounter
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  []string{srv.Addr},
		DisableCache: true,
		DialCtxFn: func(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			conn, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			return countedConn{conn, &ctr}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	c, err := holdfast.New(holdfast.Config{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	const goroutines, cycles = 64, 100
	round := func() {
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := fmt.Sprintf("batch-%d", g)
				for range cycles / 2 {
					l := c.Lock(ctx, name)
					if err := l.Wait(ctx); err != nil {
						t.Error(err)
						return
					}
					if err := l.Release(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	round()
	// The server forgets the scripts (a restart, SCRIPT FLUSH): the next
	// batches meet NOSCRIPT and load them again, every cycle still works.
	srv.Do(t, "SCRIPT", "FLUSH")
	round()
	calls, writes := ctr.evalshas.Load(), ctr.writes.Load()
	perWrite := float64(calls) / float64(max(writes, 1))
	t.Logf("%d script calls in %d writes: %.1f per write", calls, writes, perWrite)
	if calls < 2*goroutines*cycles {
		t.Fatalf("%d EVALSHAs for %d cycles", calls, goroutines*cycles)
	}
	if perWrite < 2 {
		t.Fatalf("%.1f script calls per write: not batched", perWrite)
	}
	noLockKeys(t, srv)
}
