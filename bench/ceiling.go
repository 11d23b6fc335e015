package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast/holdfast/scripts"
)

// ceilingName is the lock name of the ceiling's requests; redis-benchmark
// replaces __rand_int__ with a random 12-digit number on every request.
const ceilingName = "ceiling:__rand_int__"

// runCeiling measures what the server alone can do: holdfast's acquire
// script by EVALSHA from redis-benchmark (50 clients, pipelined 16 deep, a
// fresh random key per request so every call is a grant), and the
// round-trip time of one PING on one connection.
func runCeiling(e *env) error {
	if _, err := exec.LookPath("redis-benchmark"); err != nil {
		return fmt.Errorf("redis-benchmark not found: %w", err)
	}
	v, err := e.admin.do("SCRIPT", "LOAD", scripts.Acquire)
	if err != nil {
		return fmt.Errorf("SCRIPT LOAD: %w", err)
	}
	sha, _ := v.(string)
	host, port, _ := net.SplitHostPort(e.srv.addr)

	target, rounds, pings := 3*time.Second, 3, 20000
	if e.quick {
		target, rounds, pings = 1*time.Second, 2, 5000
	}
	evalsha := func(n int) (map[string]float64, error) {
		// The lock key gets a random number, so each call is a grant; the
		// script needs no relation between its keys (standalone server). The
		// slot fence counter is one key, as for names sharing a slot.
		keys := scripts.GrantKeys(ceilingName, scripts.FairQueueKey(ceilingName))
		return benchmark(host, port, append([]string{"-c", "50", "-P", "16", "-n", strconv.Itoa(n), "-r", "100000000",
			"EVALSHA", sha, strconv.Itoa(len(keys))}, append(keys, "bench:ceiling", "30000", "0")...)...)
	}
	var runErr error
	labelled("ceiling", refBenchmark, func(context.Context) {
		// A short run first sizes the measured runs to about target each.
		warm, err := evalsha(50_000)
		if err != nil {
			runErr = err
			return
		}
		n := max(50_000, int(warm["rps"]*target.Seconds()))
		for range rounds {
			m, err := evalsha(n)
			if err != nil {
				runErr = err
				return
			}
			e.res.add("ceiling", refBenchmark, "evalsha_per_s", m["rps"])
			p, err := benchmark(host, port, "-c", "1", "-P", "1", "-n", strconv.Itoa(pings), "--precision", "3", "PING")
			if err != nil {
				runErr = err
				return
			}
			e.res.add("ceiling", refBenchmark, "rtt_p50_us", p["p50_latency_ms"]*1000)
		}
		if rtt, err := goPingRTT(e.srv.addr, pings); err == nil {
			e.notef("ceiling: PING round trip from a plain Go loop on one connection: p50 %.1f µs (redis-benchmark's is in the table)", us(rtt))
		}
	})
	if runErr != nil {
		return runErr
	}
	if !e.srv.owned {
		e.cleanup("holdfast:{ceiling:*")
	}
	return nil
}

// benchmark runs redis-benchmark on a loopback server with --csv and returns
// the columns of its one result line.
func benchmark(host, port string, args ...string) (map[string]float64, error) {
	all := append([]string{"-h", host, "-p", port, "--csv"}, args...)
	out, err := exec.Command("redis-benchmark", all...).Output()
	if err != nil {
		return nil, fmt.Errorf("redis-benchmark %s: %w", strings.Join(args, " "), err)
	}
	recs, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
	if err != nil || len(recs) < 2 {
		return nil, fmt.Errorf("redis-benchmark output not understood: %q", out)
	}
	m := map[string]float64{}
	head, row := recs[0], recs[len(recs)-1]
	for i := range head {
		if i < len(row) {
			if v, err := strconv.ParseFloat(row[i], 64); err == nil {
				m[head[i]] = v
			}
		}
	}
	if _, ok := m["rps"]; !ok {
		return nil, fmt.Errorf("redis-benchmark output has no rps: %q", out)
	}
	return m, nil
}

// goPingRTT measures the median PING round trip of a plain Go loop on one
// connection: the floor under any Go client's round trip.
func goPingRTT(addr string, n int) (time.Duration, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	r := bufio.NewReader(c)
	req := []byte("*1\r\n$4\r\nPING\r\n")
	lat := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if _, err := c.Write(req); err != nil {
			return 0, err
		}
		if _, err := r.ReadString('\n'); err != nil {
			return 0, err
		}
		lat = append(lat, time.Since(t0))
	}
	return percentile(lat, 50), nil
}

// cleanup deletes the keys matching pattern on a server this run did not
// start (a server it started is flushed instead).
func (e *env) cleanup(pattern string) {
	cursor, deleted := "0", 0
	for {
		v, err := e.admin.do("SCAN", cursor, "MATCH", pattern, "COUNT", "1000")
		if err != nil {
			e.notef("cleanup of %s failed: %v", pattern, err)
			return
		}
		arr, _ := v.([]any)
		if len(arr) != 2 {
			return
		}
		cursor, _ = arr[0].(string)
		keys, _ := arr[1].([]any)
		if len(keys) > 0 {
			args := []string{"UNLINK"}
			for _, k := range keys {
				s, _ := k.(string)
				args = append(args, s)
			}
			e.admin.do(args...)
			deleted += len(keys)
		}
		if cursor == "0" {
			break
		}
	}
	e.logf("deleted %d keys matching %s", deleted, pattern)
}
