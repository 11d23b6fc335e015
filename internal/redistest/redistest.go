// Package redistest starts real redis-server processes for tests, on free
// loopback ports, and lets a test kill and restart them to inject faults.
package redistest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
			"Install it with `apt-get install -y redis-server` (as root), or run ./scripts/test.sh, which does.")
	}
	return path
}

// Start runs a redis-server without persistence on a free loopback port. It is
// killed when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return startNew(t, false)
}

// StartPersistent is Start with an append-only file synced on every write:
// Restart brings the keyspace back as it was at the kill.
func StartPersistent(t testing.TB) *Server {
	t.Helper()
	return startNew(t, true)
}

// startNew starts a server on a free port, and on another one if the port
// was taken before the server could bind it (see Launch).
func startNew(t testing.TB, persist bool) *Server {
	t.Helper()
	s := &Server{t: t, persist: persist}
	OnFreePorts(t, func() error {
		s.Addr, s.dir = pickAddr(t), t.TempDir()
		return s.launch()
	})
	// Registered after the directory's removal, so that it runs before it
	// (cleanups run last first): a live server, or a replica taking a full
	// sync, would write files into the directory while it is removed.
	t.Cleanup(s.Kill)
	return s
}

// OnFreePorts calls launch, which picks fresh ports and starts a server on
// them, until it succeeds; it tries again when a port was taken before the
// server could bind it (ErrPortTaken), at most launchAttempts times, and
// fails the test on any other error.
func OnFreePorts(t testing.TB, launch func() error) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		err := launch()
		if err == nil {
			return
		}
		if !errors.Is(err, ErrPortTaken) || attempt == launchAttempts {
			t.Fatalf("redistest: %v", err)
		}
	}
}

// launchAttempts bounds the ports OnFreePorts tries.
const launchAttempts = 5

// pickAddr picks a new server's address; tests replace it.
var pickAddr = FreeAddr

// FreeAddr returns a loopback address whose port was free a moment ago.
// Another process may take it before a server binds it: Launch reports
// that as ErrPortTaken.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: no free port: %v", err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// start starts the server again on its address (Restart), failing the
// test if it does not come up.
func (s *Server) start() {
	s.t.Helper()
	if err := s.launch(); err != nil {
		s.t.Fatalf("redistest: %v", err)
	}
}

func (s *Server) launch() error {
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
	cmd, err := Launch(bin, args, s.Addr, filepath.Join(s.dir, "redis.log"))
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	return nil
}

// ErrPortTaken reports a redis-server that could not bind a port it was
// given: another process took the port after FreeAddr found it free (the
// tests of several packages run at once, and the kernel hands out ports to
// their outgoing connections too). The caller picks other ports and tries
// again.
var ErrPortTaken = errors.New("a port was taken before redis-server could bind it")

// Launch runs bin (redis-server) with args, logging to logPath, and waits
// until the server at addr answers PING. A server that failed to bind one
// of its ports, as its log tells, is reaped at once and ErrPortTaken
// returned; one that does not come up within 10 s is killed and an error
// with its log returned.
func Launch(bin string, args []string, addr, logPath string) (*exec.Cmd, error) {
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting redis-server: %w", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := ping(addr)
		if err == nil {
			return cmd, nil
		}
		log, _ := os.ReadFile(logPath)
		taken := bytes.Contains(log, []byte("Address already in use"))
		if taken || time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			if taken {
				return nil, fmt.Errorf("redis-server on %s: %w\n%s", addr, ErrPortTaken, log)
			}
			return nil, fmt.Errorf("redis-server on %s did not come up: %w\n%s", addr, err, log)
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

// Freeze stops the server with SIGSTOP: its sockets stay open and it
// answers nothing, as a hung server would, until Thaw. A frozen server is
// thawed when the test ends, before it is killed.
func (s *Server) Freeze() {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		s.t.Fatal("redistest: Freeze of a stopped server")
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		s.t.Fatalf("redistest: SIGSTOP: %v", err)
	}
	s.t.Cleanup(s.Thaw)
}

// Thaw resumes a server stopped by Freeze (SIGCONT). Thawing a running
// server does nothing.
func (s *Server) Thaw() {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd != nil {
		cmd.Process.Signal(syscall.SIGCONT)
	}
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
