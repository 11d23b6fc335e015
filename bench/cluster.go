package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// redisCluster is a Redis Cluster of masters only, started by the benchmark on
// free loopback ports and joined with `redis-cli --cluster create` (slots
// spread evenly), as the main module's deployment tests start theirs
// (internal/topology, which a separate module cannot import).
type redisCluster struct {
	dir    string
	nodes  []*exec.Cmd
	addrs  []string
	admins []*admin
}

// startRedisCluster starts masters cluster-enabled redis-servers without
// persistence, joins them and waits until every node reports
// cluster_state:ok with all 16,384 slots served.
func startRedisCluster(masters int) (c *redisCluster, err error) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("bench: redis-cli not found on PATH (Debian package redis-tools)")
	}
	dir, err := os.MkdirTemp("", "bench-cluster-")
	if err != nil {
		return nil, err
	}
	c = &redisCluster{dir: dir}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	for i := range masters {
		port, bus, err := twoFreePorts()
		if err != nil {
			return nil, err
		}
		nodeDir := filepath.Join(dir, strconv.Itoa(i))
		if err := os.Mkdir(nodeDir, 0o700); err != nil {
			return nil, err
		}
		cmd := exec.Command("redis-server",
			"--port", strconv.Itoa(port), "--cluster-port", strconv.Itoa(bus),
			"--bind", "127.0.0.1", "--dir", nodeDir, "--protected-mode", "no",
			"--cluster-enabled", "yes", "--cluster-node-timeout", "5000",
			"--save", "", "--appendonly", "no",
			"--logfile", filepath.Join(nodeDir, "redis.log"))
		setDeathSignal(cmd)
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("bench: starting redis-server: %w", err)
		}
		c.nodes = append(c.nodes, cmd)
		c.addrs = append(c.addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}
	for _, addr := range c.addrs {
		a, err := waitAdmin(addr)
		if err != nil {
			return nil, err
		}
		c.admins = append(c.admins, a)
	}
	args := append([]string{"--cluster", "create"}, c.addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("bench: redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !c.ok() {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("bench: cluster on %s not ok within 30 s", strings.Join(c.addrs, ","))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return c, nil
}

// ok reports whether every node says the cluster is ok, serves all slots
// and knows every node.
func (c *redisCluster) ok() bool {
	for _, a := range c.admins {
		v, err := a.do("CLUSTER", "INFO")
		if err != nil {
			return false
		}
		s, _ := v.(string)
		if infoValue(s, "cluster_state") != "ok" || infoValue(s, "cluster_slots_ok") != "16384" ||
			infoValue(s, "cluster_known_nodes") != strconv.Itoa(len(c.addrs)) {
			return false
		}
	}
	return true
}

// stop kills the nodes and removes their directory.
func (c *redisCluster) stop() {
	for _, a := range c.admins {
		a.close()
	}
	c.admins = nil
	for _, cmd := range c.nodes {
		if cmd.Process != nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}
	c.nodes = nil
	os.RemoveAll(c.dir)
}

// commandStats sums INFO commandstats over the masters.
func (c *redisCluster) commandStats() (map[string]int64, error) {
	out := map[string]int64{}
	for _, a := range c.admins {
		m, err := a.commandStats()
		if err != nil {
			return nil, err
		}
		for k, v := range m {
			out[k] += v
		}
	}
	return out, nil
}

// redisCPU sums the masters' CPU so far.
func (c *redisCluster) redisCPU() (time.Duration, bool) {
	var total time.Duration
	for _, a := range c.admins {
		v, err := a.do("INFO", "cpu")
		if err != nil {
			return 0, false
		}
		s, _ := v.(string)
		d, ok := parseRedisCPU(s)
		if !ok {
			return 0, false
		}
		total += d
	}
	return total, true
}

// flush empties every master.
func (c *redisCluster) flush() error {
	for _, a := range c.admins {
		if _, err := a.do("FLUSHALL"); err != nil {
			return err
		}
	}
	return nil
}

// twoFreePorts returns a port for a node's clients and one for its cluster
// bus, both free on the loopback interface just now.
func twoFreePorts() (int, int, error) {
	var ports [2]int
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, 0, err
		}
		defer ln.Close()
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports[0], ports[1], nil
}

// waitAdmin dials addr until it answers PING, for up to 10 s.
func waitAdmin(addr string) (*admin, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, err := dialAdmin(addr)
		if err == nil {
			if _, err = a.do("PING"); err == nil {
				return a, nil
			}
			a.close()
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("bench: redis-server on %s did not answer: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// infoValue returns the value of key in an INFO-style reply, or "".
func infoValue(info, key string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+":"); ok {
			return v
		}
	}
	return ""
}

// nodeScripts are the script calls each master has run so far.
type nodeScripts []int64

// scriptsByNode reads each master's script calls (scriptCalls).
func (c *redisCluster) scriptsByNode() nodeScripts {
	out := make(nodeScripts, len(c.admins))
	for i, a := range c.admins {
		if m, err := a.commandStats(); err == nil {
			out[i] = scriptCalls(m)
		}
	}
	return out
}

// rates gives each master's script calls per second from before to
// after, over secs, rounded.
func (before nodeScripts) rates(after nodeScripts, secs float64) []int64 {
	out := make([]int64, len(after))
	for i := range after {
		if i < len(before) {
			out[i] = int64(float64(after[i]-before[i])/secs + 0.5)
		}
	}
	return out
}
