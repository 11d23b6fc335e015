package topology

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Cluster is a Redis Cluster built with `redis-cli --cluster create`.
type Cluster struct {
	t testing.TB
	// Masters and Replicas are the roles as created; a failover promotes a
	// replica without changing these lists. Nodes holds them all.
	Masters, Replicas, Nodes []*Node
}

// StartCluster starts masters cluster-enabled nodes, joins them with
// redis-cli (slots spread evenly) and waits until every node reports
// cluster_state:ok.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	return StartClusterWithReplicas(t, masters, 0)
}

// StartClusterWithReplicas is StartCluster with replicas replicas per
// master; it also waits until every replica is in sync.
func StartClusterWithReplicas(t testing.TB, masters, replicas int) *Cluster {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redis-cli not found on PATH: install the Debian package redis-tools (redis-server depends on it)")
	}
	c := &Cluster{t: t}
	total := masters * (1 + replicas)
	addrs := make([]string, total)
	for i := range total {
		n := startNode(t, "", "--cluster-enabled", "yes", "--cluster-node-timeout", "2000",
			"--save", "", "--appendonly", "no")
		c.Nodes = append(c.Nodes, n)
		addrs[i] = n.Addr
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("topology: redis-cli --cluster create: %v\n%s", err, out)
	}
	eventually(t, 30*time.Second, func() string {
		return "cluster_state:ok on every node; " + c.Masters[0].Addr + " says: " + c.Masters[0].MustDo("CLUSTER", "INFO").String()
	}, func() bool {
		for _, n := range c.Nodes {
			msg, err := n.Do("CLUSTER", "INFO")
			if err != nil {
				return false
			}
			s, _ := msg.ToString()
			if infoField(s, "cluster_state") != "ok" || infoField(s, "cluster_slots_ok") != "16384" ||
				infoField(s, "cluster_known_nodes") != strconv.Itoa(total) {
				return false
			}
		}
		return true
	})
	for _, n := range c.Nodes {
		if n.Info("replication", "role") == "master" {
			c.Masters = append(c.Masters, n)
		} else {
			c.Replicas = append(c.Replicas, n)
		}
	}
	Eventually(t, 30*time.Second, "replicas in sync", func() bool {
		for _, n := range c.Replicas {
			if n.Info("replication", "master_link_status") != "up" {
				return false
			}
		}
		return true
	})
	return c
}

// Client returns a rueidis cluster client for the cluster, closed when the
// test ends.
func (c *Cluster) Client(t testing.TB) rueidis.Client {
	t.Helper()
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatalf("topology: cluster client: %v", err)
	}
	if rc.Mode() != rueidis.ClientModeCluster {
		t.Fatalf("topology: client mode %v, want cluster", rc.Mode())
	}
	t.Cleanup(rc.Close)
	return rc
}

// ID returns the node's cluster node id.
func (n *Node) ID() string {
	n.t.Helper()
	s, err := n.MustDo("CLUSTER", "MYID").ToString()
	if err != nil {
		n.t.Fatalf("topology: CLUSTER MYID: %v", err)
	}
	return s
}

// Owner returns the master serving slot, as the first node that answers
// sees it, and fails the test if there is none.
func (c *Cluster) Owner(slot uint16) *Node {
	c.t.Helper()
	n := c.Serving(slot)
	if n == nil {
		c.t.Fatalf("topology: no master owns slot %d", slot)
	}
	return n
}

// Serving returns the master serving slot, as the first node that answers
// sees it, or nil (during a failover).
func (c *Cluster) Serving(slot uint16) *Node {
	for _, n := range c.Nodes {
		msg, err := n.Do("CLUSTER", "SHARDS")
		if err != nil {
			continue
		}
		shards, _ := msg.ToArray()
		for _, sh := range shards {
			m, _ := sh.AsMap()
			slots, nodesMsg := m["slots"], m["nodes"]
			ranges, _ := slots.AsIntSlice()
			nodes, _ := nodesMsg.ToArray()
			for i := 0; i+1 < len(ranges); i += 2 {
				if int64(slot) < ranges[i] || int64(slot) > ranges[i+1] {
					continue
				}
				for _, nd := range nodes {
					nm, _ := nd.AsMap()
					role, health, portMsg := nm["role"], nm["health"], nm["port"]
					if r, _ := role.ToString(); r != "master" {
						continue
					}
					if h, _ := health.ToString(); h == "fail" {
						continue
					}
					port, _ := portMsg.AsInt64()
					for _, cand := range c.Nodes {
						if cand.Port == strconv.FormatInt(port, 10) {
							return cand
						}
					}
				}
			}
		}
		break
	}
	return nil
}

// MoveSlot migrates slot, with its keys, from its current owner to to, the
// way `redis-cli --cluster reshard` does: IMPORTING on the target, MIGRATING
// on the source, MIGRATE of the keys, then SETSLOT NODE on every master.
// Clients see ASK redirections during the move and MOVED after it.
func (c *Cluster) MoveSlot(slot uint16, to *Node) {
	c.t.Helper()
	m := c.BeginMove(slot, to)
	m.MigrateKeys()
	m.Finish()
}

// SlotMove is a migration of one slot under way (BeginMove), for tests that
// act between its steps.
type SlotMove struct {
	c        *Cluster
	slot     string
	From, To *Node
}

// BeginMove starts moving slot from its current owner to to: IMPORTING on
// the target, MIGRATING on the source. Until Finish, the source serves the
// slot's keys it still has and answers ASK (to the target) for the others.
func (c *Cluster) BeginMove(slot uint16, to *Node) *SlotMove {
	c.t.Helper()
	from := c.Owner(slot)
	if from == to {
		c.t.Fatalf("topology: slot %d is already on %s", slot, to.Addr)
	}
	m := &SlotMove{c: c, slot: strconv.Itoa(int(slot)), From: from, To: to}
	to.MustDo("CLUSTER", "SETSLOT", m.slot, "IMPORTING", from.ID())
	from.MustDo("CLUSTER", "SETSLOT", m.slot, "MIGRATING", to.ID())
	return m
}

// MigrateKeys moves every key of the slot still on the source to the
// target.
func (m *SlotMove) MigrateKeys() {
	m.c.t.Helper()
	for {
		keys, err := m.From.MustDo("CLUSTER", "GETKEYSINSLOT", m.slot, "100").AsStrSlice()
		if err != nil {
			m.c.t.Fatalf("topology: GETKEYSINSLOT: %v", err)
		}
		if len(keys) == 0 {
			return
		}
		args := append([]string{"MIGRATE", "127.0.0.1", m.To.Port, "", "0", "5000", "KEYS"}, keys...)
		m.From.MustDo(args...)
	}
}

// Finish hands the slot to the target on every master (SETSLOT NODE):
// from then on the source answers MOVED. The keys must have been migrated.
func (m *SlotMove) Finish() {
	m.c.t.Helper()
	// The target first, so it serves the slot before the source redirects.
	m.To.MustDo("CLUSTER", "SETSLOT", m.slot, "NODE", m.To.ID())
	m.From.MustDo("CLUSTER", "SETSLOT", m.slot, "NODE", m.To.ID())
	for _, n := range m.c.Masters {
		if n != m.To && n != m.From {
			n.MustDo("CLUSTER", "SETSLOT", m.slot, "NODE", m.To.ID())
		}
	}
}

// ReplicasOf returns the replicas that replicate master now (INFO
// replication's master_port), and fails the test if there is none.
func (c *Cluster) ReplicasOf(master *Node) []*Node {
	c.t.Helper()
	var out []*Node
	for _, n := range c.Nodes {
		if n != master && n.Info("replication", "role") == "slave" &&
			n.Info("replication", "master_port") == master.Port {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		c.t.Fatalf("topology: no replica of %s", master.Addr)
	}
	return out
}

// Keys returns every key on every master.
func (c *Cluster) Keys() []string {
	c.t.Helper()
	var out []string
	for _, n := range c.Masters {
		keys, err := n.MustDo("KEYS", "*").AsStrSlice()
		if err != nil {
			c.t.Fatalf("topology: KEYS: %v", err)
		}
		out = append(out, keys...)
	}
	return out
}

// LockKeys returns the lock hash keys (not fence counters, nor waiter
// marks, which lapse by themselves) on every master.
func (c *Cluster) LockKeys() []string {
	var out []string
	for _, k := range c.Keys() {
		if !strings.HasSuffix(k, ":fence") && !strings.HasSuffix(k, ":w") {
			out = append(out, k)
		}
	}
	return out
}
