package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"
)

// server is the Redis the benchmark talks to: one it started itself, or one
// named by -redis (then it is never flushed or stopped).
type server struct {
	addr  string
	owned bool
	cmd   *exec.Cmd
}

// checkLoopback refuses any address that is not on the loopback interface:
// the benchmark is a load generator and must never aim at another host.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bench: bad address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip != nil {
		if !ip.IsLoopback() {
			return fmt.Errorf("bench: %s is not a loopback address", addr)
		}
		return nil
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return fmt.Errorf("bench: cannot resolve %q to a loopback address", host)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return fmt.Errorf("bench: %s resolves to %v, not a loopback address", host, ip)
		}
	}
	return nil
}

// startServer runs redis-server on a free loopback port without persistence.
func startServer() (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command("redis-server",
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "yes")
	cmd.Stdout, cmd.Stderr = nil, os.Stderr
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: starting redis-server: %w", err)
	}
	s := &server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), owned: true, cmd: cmd}
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, err := dialAdmin(s.addr)
		if err == nil {
			_, err = a.do("PING")
			a.close()
			if err == nil {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("bench: redis-server on %s did not answer: %w", s.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *server) stop() {
	if s.owned && s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		s.cmd = nil
	}
}

// admin is a minimal RESP2 connection for the benchmark's own bookkeeping
// (INFO, SCRIPT LOAD, FLUSHALL), kept apart from the libraries' connections
// so its commands are never counted against them.
type admin struct {
	c net.Conn
	r *bufio.Reader
}

func dialAdmin(addr string) (*admin, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	return &admin{c: c, r: bufio.NewReader(c)}, nil
}

func (a *admin) close() { a.c.Close() }

func (a *admin) do(args ...string) (any, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, s := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(s), s)
	}
	a.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := a.c.Write([]byte(b.String())); err != nil {
		return nil, err
	}
	return a.read()
}

func (a *admin) read() (any, error) {
	line, err := a.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("bench: empty reply")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return nil, errors.New(line[1:])
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := readFull(a.r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		out := make([]any, 0, max(n, 0))
		for range n {
			v, err := a.read()
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("bench: unexpected reply %q", line)
}

func readFull(r *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// commandStats returns INFO commandstats as command name -> calls. Redis
// counts the commands a Lua script runs as well as the EVALSHA itself.
func (a *admin) commandStats() (map[string]int64, error) {
	v, err := a.do("INFO", "commandstats")
	if err != nil {
		return nil, err
	}
	s, _ := v.(string)
	out := map[string]int64{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if c, ok := strings.CutPrefix(kv, "calls="); ok {
				n, _ := strconv.ParseInt(c, 10, 64)
				out[name] = n
			}
		}
	}
	return out, nil
}

// commandUsec returns the microseconds INFO commandstats has counted in
// EVALSHA, the scripts' own commands included: the server's work of running
// the scripts, apart from reading, parsing and replying.
func (a *admin) commandUsec() (int64, error) {
	v, err := a.do("INFO", "commandstats")
	if err != nil {
		return 0, err
	}
	s, _ := v.(string)
	for _, line := range strings.Split(s, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if c, ok := strings.CutPrefix(kv, "usec="); ok {
				return strconv.ParseInt(c, 10, 64)
			}
		}
	}
	return 0, nil
}

// statsDelta is after - before, without the benchmark's own INFO calls.
func statsDelta(before, after map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for k, v := range after {
		if k == "info" {
			continue
		}
		if n := v - before[k]; n > 0 {
			d[k] = n
		}
	}
	return d
}

func sumCalls(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// topCalls formats the largest entries of a call-count map, e.g.
// "evalsha=1200 hget=1200 …".
func topCalls(m map[string]int64, n int) string {
	type kv struct {
		k string
		v int64
	}
	var all []kv
	for k, v := range m {
		all = append(all, kv{k, v})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v || all[i].v == all[j].v && all[i].k < all[j].k })
	var parts []string
	for i, e := range all {
		if i == n {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, fmt.Sprintf("%s=%d", e.k, e.v))
	}
	return strings.Join(parts, " ")
}

// snapshot reads the server's command stats, or nil if it cannot.
func (e *env) snapshot() map[string]int64 {
	stats := e.admin.commandStats
	if e.cl != nil {
		stats = e.cl.commandStats
	}
	m, err := stats()
	if err != nil {
		e.notef("INFO commandstats failed: %v", err)
		return nil
	}
	return m
}

// flush empties the database between scenarios, only on a server this run
// started.
func (e *env) flush() {
	if e.cl != nil {
		if err := e.cl.flush(); err != nil {
			e.notef("FLUSHALL on the cluster failed: %v", err)
		}
		return
	}
	if e.srv.owned {
		if _, err := e.admin.do("FLUSHALL"); err != nil {
			e.notef("FLUSHALL failed: %v", err)
		}
	}
}
