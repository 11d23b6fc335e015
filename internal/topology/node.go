// Package topology starts real Redis deployments for tests — a Redis Cluster
// of several masters, a primary with a replica watched by Sentinels — on free
// loopback ports, and lets a test kill, stop and continue their processes to
// inject faults. Every process and temporary directory it starts is removed
// when the test ends.
//
// Sentinels run as `redis-server CONF --sentinel`, which is what the
// redis-sentinel binary is, so the Debian package redis-server (with
// redis-tools, which it depends on, for redis-cli) is all the tests need.
package topology

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/internal/redistest"
)

// Node is one redis-server process (data node or sentinel) owned by a test.
type Node struct {
	t    testing.TB
	Addr string
	Port string
	dir  string
	args []string // after the config file, if any

	mu  sync.Mutex
	cmd *exec.Cmd
}

// startNode runs redis-server with args on free loopback ports; conf, when
// not empty, is written to a config file given first (sentinels need one
// they can rewrite). A cluster node ("--cluster-enabled" among args) gets a
// free port for its cluster bus too: the default, port+10000, may be taken
// or past 65535. A port taken before the server could bind it is replaced
// by another (redistest.OnFreePorts).
func startNode(t testing.TB, conf string, args ...string) *Node {
	t.Helper()
	var n *Node
	redistest.OnFreePorts(t, func() error {
		n = newNode(t, conf, slices.Contains(args, "--cluster-enabled"), args)
		return n.launch()
	})
	t.Cleanup(n.Kill)
	return n
}

// StartNode starts one redis-server with args on free loopback ports, as
// the deployments of this package start theirs (see startNode). It is
// killed when the test ends.
func StartNode(t testing.TB, args ...string) *Node {
	t.Helper()
	return startNode(t, "", args...)
}

// newNode prepares a node on fresh ports and a fresh directory.
func newNode(t testing.TB, conf string, bus bool, args []string) *Node {
	t.Helper()
	addr := redistest.FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	dir := t.TempDir()
	var full []string
	if conf != "" {
		path := filepath.Join(dir, "node.conf")
		conf = "port " + port + "\nbind 127.0.0.1\ndir " + dir + "\n" + conf
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatalf("topology: writing %s: %v", path, err)
		}
		full = append(full, path)
	}
	full = append(full, args...)
	if bus {
		_, busPort, _ := net.SplitHostPort(redistest.FreeAddr(t))
		full = append(full, "--cluster-port", busPort)
	}
	full = append(full, "--port", port, "--bind", "127.0.0.1", "--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"), "--daemonize", "no", "--protected-mode", "no")
	return &Node{t: t, Addr: addr, Port: port, dir: dir, args: full}
}

// launch starts the node's process and waits until it answers.
func (n *Node) launch() error {
	n.t.Helper()
	cmd, err := redistest.Launch(redistest.Binary(n.t), n.args, n.Addr, filepath.Join(n.dir, "redis.log"))
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.cmd = cmd
	n.mu.Unlock()
	return nil
}

// Log returns the node's log file, for failure messages.
func (n *Node) Log() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "redis.log"))
	return string(b)
}

// Kill stops the process with SIGKILL and waits for it. Killing a dead node
// does nothing.
func (n *Node) Kill() {
	n.mu.Lock()
	cmd := n.cmd
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	cmd.Wait()
}

// Stop freezes the process with SIGSTOP: its sockets stay open, it answers
// nothing. Continue resumes it.
func (n *Node) Stop() { n.signal(syscall.SIGSTOP) }

// Continue resumes a process frozen by Stop.
func (n *Node) Continue() { n.signal(syscall.SIGCONT) }

func (n *Node) signal(sig syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		n.cmd.Process.Signal(sig)
	}
}

// Do runs one command on a fresh connection to this node alone and returns
// its reply. Redis error replies are returned as errors.
func (n *Node) Do(args ...string) (rueidis.RedisMessage, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{n.Addr}, DisableCache: true, ForceSingleClient: true,
		DisableRetry: true, Dialer: net.Dialer{Timeout: time.Second},
	})
	if err != nil {
		return rueidis.RedisMessage{}, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Do(ctx, c.B().Arbitrary(args...).Build()).ToMessage()
}

// MustDo is Do that fails the test on any error but a nil reply.
func (n *Node) MustDo(args ...string) *rueidis.RedisMessage {
	n.t.Helper()
	msg, err := n.Do(args...)
	if err != nil && !rueidis.IsRedisNil(err) {
		n.t.Fatalf("topology: %s %v: %v", n.Addr, args, err)
	}
	return &msg
}

// Info returns the value of field in the node's INFO section (or "").
func (n *Node) Info(section, field string) string {
	msg, err := n.Do("INFO", section)
	if err != nil {
		return ""
	}
	s, _ := msg.ToString()
	return infoField(s, field)
}

func infoField(s, field string) string {
	s = strings.TrimPrefix(s, "txt:") // RESP3 verbatim string
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// Eventually polls cond every 20ms until it holds or limit passes, then
// fails the test with what.
func Eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	eventually(t, limit, func() string { return what }, cond)
}

func eventually(t testing.TB, limit time.Duration, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("topology: %s: not within %v", what(), limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
