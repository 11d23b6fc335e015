// Package redistest starts real redis-server processes for tests, on free
// loopback ports, and lets a test kill and restart them to inject faults.
package redistest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Server is one redis-server process owned by a test.
type Server struct {
	t       testing.TB
	Addr    string
	dir     string
	persist bool // append-only file, fsync on every write

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Binary returns the path of redis-server, or fails the test with a message
// telling how to install it.
func Binary(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found on PATH: these tests need a real Redis. " +
			"Install it with `apt-get install -y redis-server` (as root), or run the README's test command, which does.")
	}
	return path
}

// Start runs a redis-server without persistence on a free loopback port. It is
// killed when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, Addr: freeAddr(t), dir: t.TempDir()}
	s.start()
	t.Cleanup(s.Kill)
	return s
}

// StartPersistent is Start with an append-only file synced on every write:
// Restart brings the keyspace back as it was at the kill.
func StartPersistent(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, Addr: freeAddr(t), dir: t.TempDir(), persist: true}
	s.start()
	t.Cleanup(s.Kill)
	return s
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: no free port: %v", err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func (s *Server) start() {
	s.t.Helper()
	bin := Binary(s.t)
	_, port, _ := net.SplitHostPort(s.Addr)
	aof := []string{"--appendonly", "no"}
	if s.persist {
		aof = []string{"--appendonly", "yes", "--appendfsync", "always"}
	}
	args := append([]string{
		"--port", port, "--bind", "127.0.0.1", "--save", "",
		"--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log"), "--daemonize", "no",
		"--protected-mode", "no"}, aof...)
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("redistest: starting redis-server: %v", err)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	if err := WaitReady(s.Addr, 10*time.Second); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
		s.t.Fatalf("redistest: redis-server on %s did not come up: %v\n%s", s.Addr, err, log)
	}
}

// WaitReady waits until the server at addr answers PING, for up to limit.
func WaitReady(addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		err := ping(addr)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("unexpected reply %q", line)
	}
	return nil
}

// Kill stops the server with SIGKILL and waits for it to exit. Killing a
// stopped server does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	cmd.Wait()
}

// Restart kills the server and starts a new one on the same address: empty,
// or with the keyspace of the kill for a server from StartPersistent.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.start()
}

// Client returns a rueidis client for the server, closed when the test ends.
func (s *Server) Client(t testing.TB) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  []string{s.Addr},
		DisableCache: true,
	})
	if err != nil {
		t.Fatalf("redistest: client for %s: %v", s.Addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// Do runs one command on a fresh connection and returns its reply, failing
// the test on error. It is meant for inspecting the keyspace.
func (s *Server) Do(t testing.TB, args ...string) *rueidis.RedisMessage {
	t.Helper()
	c := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msg, err := c.Do(ctx, c.B().Arbitrary(args...).Build()).ToMessage()
	if err != nil && !rueidis.IsRedisNil(err) {
		t.Fatalf("redistest: %v: %v", args, err)
	}
	return &msg
}

// Keys returns every key in the server's keyspace.
func (s *Server) Keys(t testing.TB) []string {
	t.Helper()
	arr, err := s.Do(t, "KEYS", "*").AsStrSlice()
	if err != nil {
		t.Fatalf("redistest: KEYS: %v", err)
	}
	return arr
}

// Port returns the server's port.
func (s *Server) Port() int {
	_, p, _ := net.SplitHostPort(s.Addr)
	n, _ := strconv.Atoi(p)
	return n
}
