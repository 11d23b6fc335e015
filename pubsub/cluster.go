package pubsub

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/internal/keyslot"
)

// The router of a cluster Manager: it places each wanted channel on the
// shard (dedicated connection) of the master serving the channel's slot,
// starting a shard's connection goroutine the first time a master is used.
// It reads the slot map with CLUSTER SHARDS when it has none and again after
// a connection reported it stale (a refused subscription, an unasked
// SUNSUBSCRIBE, a broken connection).

// SlotMap is the master address serving each slot, "" where none does.
type SlotMap [16384]string

// slotMap is the router's name for it.
type slotMap = SlotMap

// route runs the router until Close.
func (m *Manager) route() {
	defer m.wg.Done()
	var slots *slotMap
	backoff := minBackoff
	for {
		select {
		case <-m.routeKick:
		case <-m.quit:
			return
		}
		for {
			m.mu.Lock()
			if m.staleMap {
				slots, m.staleMap = nil, false
			}
			work := len(m.unrouted) > 0
			m.mu.Unlock()
			if !work {
				break
			}
			if slots == nil {
				var err error
				if slots, err = m.readSlots(); err != nil {
					m.cfg.Logger.Debug("holdfast/pubsub: reading the cluster's slot map", "err", err)
				}
			}
			if slots != nil && m.place(slots) {
				backoff = minBackoff
				break
			}
			// No map, or a master the client does not know yet: read the
			// map again after a backoff.
			slots = nil
			t := m.cfg.Clock.Timer(backoff)
			select {
			case <-m.quit:
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, maxBackoff)
		}
	}
}

// staleLocked asks the router to read the slot map again before it places
// the next channels.
func (m *Manager) staleLocked() {
	m.staleMap = true
	poke(m.routeKick)
}

// place puts every unrouted channel with listeners on the shard of its
// slot's master, and reports whether it placed them all.
func (m *Manager) place(slots *slotMap) bool {
	nodes := m.cfg.Redis.Nodes()
	missing, all := m.placeAll(slots, nodes)
	if !all && missing != "" {
		// Make the client learn the topology it is missing: a keyed
		// command to a moved slot makes rueidis follow and refresh.
		ctx, cancel := context.WithTimeout(m.ctx, time.Second)
		m.cfg.Redis.Do(ctx, m.cfg.Redis.B().Exists().Key(missing).Build())
		cancel()
	}
	return all
}

func (m *Manager) placeAll(slots *slotMap, nodes map[string]rueidis.Client) (missing string, all bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return "", true
	}
	all = true
	for name := range m.unrouted {
		c := m.channels[name]
		if c == nil || c.shard != nil {
			delete(m.unrouted, name)
			continue
		}
		if len(c.listeners) == 0 {
			m.dropLocked(c)
			continue
		}
		addr := slots[Slot(name)]
		client := nodes[addr]
		if client == nil {
			all, missing = false, name
			continue
		}
		sh := m.shards[addr]
		if sh == nil {
			sh = newShard(addr, client)
			m.shards[addr] = sh
			m.wg.Add(1)
			go m.run(sh)
		}
		delete(m.unrouted, name)
		m.placeLocked(c, sh)
		m.markDirtyLocked(c)
	}
	return missing, all
}

// readSlots asks the cluster which master serves each slot.
func (m *Manager) readSlots() (*slotMap, error) {
	ctx, cancel := context.WithTimeout(m.ctx, 5*time.Second)
	defer cancel()
	return ReadSlots(ctx, m.cfg.Redis)
}

// ReadSlots asks the cluster rc is a client of (CLUSTER SHARDS) which
// master serves each slot, by the address rc.Nodes names it with. The
// renewal batcher reads it too, to send the renewals of a node together.
func ReadSlots(ctx context.Context, rc rueidis.Client) (*SlotMap, error) {
	shards, err := rc.Do(ctx, rc.B().ClusterShards().Build()).ToArray()
	if err != nil {
		return nil, err
	}
	var slots slotMap
	for _, sh := range shards {
		fields, err := sh.AsMap()
		if err != nil {
			return nil, err
		}
		ranges, nodes := fields["slots"], fields["nodes"]
		bounds, err := ranges.AsIntSlice()
		if err != nil {
			return nil, err
		}
		list, err := nodes.ToArray()
		if err != nil {
			return nil, err
		}
		addr := ""
		for _, n := range list {
			nf, err := n.AsMap()
			if err != nil {
				return nil, err
			}
			if str(nf, "role") == "master" && str(nf, "health") != "fail" {
				addr = nodeAddr(nf)
			}
		}
		if addr == "" {
			continue
		}
		for i := 0; i+1 < len(bounds); i += 2 {
			for s := bounds[i]; s <= bounds[i+1] && s < int64(len(slots)); s++ {
				slots[s] = addr
			}
		}
	}
	return &slots, nil
}

func str(m map[string]rueidis.RedisMessage, key string) string {
	v, ok := m[key]
	if !ok {
		return ""
	}
	if s, err := v.ToString(); err == nil {
		return s
	}
	if n, err := v.AsInt64(); err == nil {
		return strconv.FormatInt(n, 10)
	}
	return ""
}

// nodeAddr is a node's address as rueidis names it: endpoint (or ip) and
// port (tls-port when the node has no plain port).
func nodeAddr(n map[string]rueidis.RedisMessage) string {
	host := str(n, "endpoint")
	if host == "" || host == "?" {
		host = str(n, "ip")
	}
	port := str(n, "port")
	if port == "" || port == "0" {
		port = str(n, "tls-port")
	}
	if strings.Contains(host, ":") {
		return fmt.Sprintf("[%s]:%s", host, port)
	}
	return host + ":" + port
}

// Slot is the Redis Cluster slot of a key or channel (CRC16 of its hash
// tag, mod 16384).
func Slot(key string) uint16 { return keyslot.Of(key) }
