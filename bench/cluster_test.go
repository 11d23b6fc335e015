package main

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// The scale scenario's cluster: three masters serving every slot, a key
// written through a cluster client is found on exactly one master, script
// calls are summed over the masters, and flush empties them all.
func TestRedisClusterServesAndCounts(t *testing.T) {
	c, err := startRedisCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	if len(c.addrs) != 3 || !c.ok() {
		t.Fatalf("cluster %v not ok", c.addrs)
	}
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.addrs, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if rdb.Mode() != rueidis.ClientModeCluster {
		t.Fatalf("client mode %v, want cluster", rdb.Mode())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	script := rueidis.NewLuaScript(`return redis.call("SET", KEYS[1], ARGV[1])`)
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	// A first pass loads the script on every master (a NOSCRIPT EVALSHA
	// and its EVAL count as two calls), the second is counted.
	for _, k := range keys {
		if err := script.Exec(ctx, rdb, []string{k}, []string{"0"}).Error(); err != nil {
			t.Fatalf("script on %s: %v", k, err)
		}
	}
	before := c.scriptsByNode()
	for _, k := range keys {
		if err := script.Exec(ctx, rdb, []string{k}, []string{"1"}).Error(); err != nil {
			t.Fatalf("script on %s: %v", k, err)
		}
	}
	after := c.scriptsByNode()
	var sum int64
	busy := 0
	for i, r := range before.rates(after, 1) {
		sum += r
		if r > 0 {
			busy++
		}
		t.Logf("master %s: %d script calls", c.addrs[i], r)
	}
	if sum != int64(len(keys)) {
		t.Fatalf("script calls summed over masters %d, want %d", sum, len(keys))
	}
	if busy < 2 {
		t.Fatalf("8 keys of different slots went to %d master(s), want them spread", busy)
	}
	stats, err := c.commandStats()
	if err != nil {
		t.Fatal(err)
	}
	if got := scriptCalls(stats); got < int64(len(keys)) {
		t.Fatalf("commandstats over masters counts %d script calls, want ≥ %d", got, len(keys))
	}
	if err := c.flush(); err != nil {
		t.Fatal(err)
	}
	for _, a := range c.admins {
		if n, err := a.do("DBSIZE"); err != nil || n.(int64) != 0 {
			t.Fatalf("DBSIZE after flush: %v %v", n, err)
		}
	}
}
