package topology

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// MasterName is the name the Sentinels monitor the primary under.
const MasterName = "holdfast"

// Sentinel is a primary, one replica and three Sentinels (quorum 2) that
// fail over a second after the primary stops answering.
type Sentinel struct {
	t         testing.TB
	Primary   *Node
	Replica   *Node
	Sentinels []*Node
}

// StartSentinel starts the deployment and waits until the replica is in
// sync and every Sentinel knows the replica and the other Sentinels.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	s := &Sentinel{t: t}
	s.Primary = startNode(t, "", "--save", "", "--appendonly", "no")
	s.Replica = startNode(t, "", "--save", "", "--appendonly", "no", "--replicaof", "127.0.0.1", s.Primary.Port)
	Eventually(t, 20*time.Second, "replica in sync", func() bool {
		return s.Replica.Info("replication", "master_link_status") == "up"
	})
	conf := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %s 2\n"+
		"sentinel down-after-milliseconds %[1]s 1000\n"+
		"sentinel failover-timeout %[1]s 4000\n"+
		"sentinel parallel-syncs %[1]s 1\n", MasterName, s.Primary.Port)
	for range 3 {
		s.Sentinels = append(s.Sentinels, startNode(t, conf, "--sentinel"))
	}
	Eventually(t, 30*time.Second, "sentinels see the replica and each other", func() bool {
		for _, n := range s.Sentinels {
			msg, err := n.Do("SENTINEL", "MASTER", MasterName)
			if err != nil {
				return false
			}
			m, err := msg.AsStrMap()
			if err != nil || m["num-slaves"] != "1" || m["num-other-sentinels"] != "2" {
				return false
			}
		}
		return true
	})
	return s
}

// SentinelAddrs returns the Sentinels' addresses.
func (s *Sentinel) SentinelAddrs() []string {
	out := make([]string, len(s.Sentinels))
	for i, n := range s.Sentinels {
		out[i] = n.Addr
	}
	return out
}

// Client returns a rueidis client that finds the primary through the
// Sentinels and follows failovers, closed when the test ends.
func (s *Sentinel) Client(t testing.TB) rueidis.Client {
	t.Helper()
	rc, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  s.SentinelAddrs(),
		Sentinel:     rueidis.SentinelOption{MasterSet: MasterName},
		DisableCache: true,
	})
	if err != nil {
		t.Fatalf("topology: sentinel client: %v", err)
	}
	if rc.Mode() != rueidis.ClientModeSentinel {
		t.Fatalf("topology: client mode %v, want sentinel", rc.Mode())
	}
	t.Cleanup(rc.Close)
	return rc
}

// PrimaryAddr returns the primary's address as the first answering
// Sentinel reports it.
func (s *Sentinel) PrimaryAddr() string {
	for _, n := range s.Sentinels {
		msg, err := n.Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MasterName)
		if err != nil {
			continue
		}
		hp, err := msg.AsStrSlice()
		if err == nil && len(hp) == 2 {
			return hp[0] + ":" + hp[1]
		}
	}
	return ""
}

// WaitFailover waits until the Sentinels name the replica the primary and
// the replica answers as a master.
func (s *Sentinel) WaitFailover(limit time.Duration) {
	s.t.Helper()
	Eventually(s.t, limit, "failover to the replica", func() bool {
		return s.PrimaryAddr() == s.Replica.Addr && s.Replica.Info("replication", "role") == "master"
	})
}
