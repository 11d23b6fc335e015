package main

import (
	"context"
	"fmt"
	"runtime"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast"
)

// clientsN is how many Clients of a library the clients scenario creates.
const clientsN = 50

// runClients measures what one more Client of a library costs in heap, two
// ways:
//
//   - heap_bytes_per_client: the library's client made on a Redis client
//     the process already has, where the library takes one (holdfast's
//     Config.Redis, redsync's pool, redislock's go-redis client): what the
//     library itself adds per Client. rueidislock makes its own rueidis
//     client inside NewLocker, so its figure includes it.
//   - heap_bytes_per_client_with_redis: each Client with a Redis client of
//     its own, so its own connections and buffers.
//
// N Clients are created against the run's server, each takes and releases
// one lock (so that whatever a Client sets up on first use is set up), and
// the heap in use after a GC is compared with the heap before them.
func runClients(e *env) error {
	rounds := 3
	if e.quick {
		rounds = 1
	}
	for r := range rounds {
		for _, lib := range e.order(r) {
			modes := []bool{true, false}
			if lib == libRueidislock {
				modes = []bool{false} // the same Client either way
			}
			for _, shared := range modes {
				var err error
				labelled("clients", lib, func(ctx context.Context) {
					err = clientsRound(ctx, e, lib, r, rounds, shared)
				})
				if err != nil {
					return fmt.Errorf("%s: %w", lib, err)
				}
			}
		}
	}
	return nil
}

// sharedOpener makes Clients of lib that share one Redis client, opened
// with the first; close closes that client.
type sharedOpener struct {
	e     *env
	lib   string
	ctr   *cmdCounter
	rueid rueidis.Client
	gored *goredis.Client // redsync's and redislock's
}

func (s *sharedOpener) open() (locker, error) {
	switch s.lib {
	case libHoldfast:
		if s.rueid == nil {
			rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.e.srv.addr}, DialCtxFn: s.ctr.rueidisDialer()})
			if err != nil {
				return nil, err
			}
			s.rueid = rdb
		}
		c, err := holdfast.New(holdfast.Config{Redis: s.rueid})
		if err != nil {
			return nil, err
		}
		return &hfLocker{c: c}, nil
	case libRedsync, libRedislock:
		if s.gored == nil {
			s.gored = s.e.goredis(s.ctr)
		}
		if s.lib == libRedsync {
			return newRsLocker(nil, s.gored, s.e.retryDelay), nil
		}
		return newRlLocker(nil, s.gored, s.e.retryDelay), nil
	}
	// rueidislock takes no client: each Locker makes its own.
	return s.e.open(s.lib, s.ctr, openOpts{})
}

func (s *sharedOpener) close() {
	if s.rueid != nil {
		s.rueid.Close()
	}
	if s.gored != nil {
		s.gored.Close()
	}
}

func clientsRound(ctx context.Context, e *env, lib string, round, rounds int, shared bool) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ctr := newCounter()
	so := &sharedOpener{e: e, lib: lib, ctr: ctr}
	defer so.close()
	open := so.open
	metric := "heap_bytes_per_client"
	if !shared {
		open = func() (locker, error) { return e.open(lib, ctr, openOpts{}) }
		metric = "heap_bytes_per_client_with_redis"
	}
	// One Client stays open through the measurement, so that what a
	// library sets up once per process (a shared actor system, pools, the
	// shared Redis client) is not charged to the N Clients, however the
	// library ties its lifetime to its Clients.
	first, err := open()
	if err != nil {
		return err
	}
	defer first.Close()
	if err := useOnce(ctx, first, fmt.Sprintf("c:%s:%d:first", lib, round)); err != nil {
		return err
	}

	cls := make([]locker, 0, clientsN)
	defer func() {
		for _, c := range cls {
			c.Close()
		}
	}()
	var m0, m1 runtime.MemStats
	g0 := runtime.NumGoroutine()
	settleHeap()
	runtime.ReadMemStats(&m0)
	for i := range clientsN {
		cl, err := open()
		if err != nil {
			return err
		}
		cls = append(cls, cl)
		if err := useOnce(ctx, cl, fmt.Sprintf("c:%s:%d:%d", lib, round, i)); err != nil {
			return err
		}
	}
	settleHeap()
	runtime.ReadMemStats(&m1)
	g1 := runtime.NumGoroutine()
	perClient := (float64(m1.HeapAlloc) - float64(m0.HeapAlloc)) / clientsN
	e.res.add("clients", lib, metric, perClient)
	if lib == libRueidislock {
		// NewLocker takes no client: the Locker with its own is all there is.
		e.res.add("clients", lib, "heap_bytes_per_client", perClient)
	}
	if round == rounds-1 {
		e.notef("clients/%s (last round, %s): %d Clients each used once: heap +%.0f B, goroutines +%.1f, goroutine stacks +%.0f B per Client",
			lib, metric, clientsN, perClient, float64(g1-g0)/clientsN, (float64(m1.StackInuse)-float64(m0.StackInuse))/clientsN)
	}
	return nil
}

// settleHeap collects garbage twice: sync.Pool keeps what it held through
// one collection (its victim cache), so one GC leaves the heap reading
// depend on what earlier scenarios pooled.
func settleHeap() {
	runtime.GC()
	runtime.GC()
}

// useOnce takes and releases one lock on cl.
func useOnce(ctx context.Context, cl locker, name string) error {
	h, err := cl.Lock(ctx, name)
	if err != nil {
		return err
	}
	return release(h)
}
