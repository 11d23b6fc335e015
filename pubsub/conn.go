package pubsub

import (
	"errors"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/redis/rueidis"
)

// protocol is what differs between plain and sharded pub/sub: the commands
// and the push kinds that confirm them.
type protocol struct {
	subscribe    func(b rueidis.Builder, channels []string) rueidis.Completed
	unsubscribe  func(b rueidis.Builder, channels []string) rueidis.Completed
	subscribed   string // push kind confirming subscribe
	unsubscribed string // push kind confirming unsubscribe
	// group names the channels one command may carry together: sharded
	// commands are refused (CROSSSLOT) unless every channel has one slot.
	group func(channel string) uint16
}

var plainPubSub = protocol{
	subscribe: func(b rueidis.Builder, chs []string) rueidis.Completed {
		return b.Subscribe().Channel(chs...).Build()
	},
	unsubscribe: func(b rueidis.Builder, chs []string) rueidis.Completed {
		return b.Unsubscribe().Channel(chs...).Build()
	},
	subscribed:   "subscribe",
	unsubscribed: "unsubscribe",
	group:        func(string) uint16 { return 0 },
}

var shardedPubSub = protocol{
	subscribe: func(b rueidis.Builder, chs []string) rueidis.Completed {
		return b.Ssubscribe().Channel(chs...).Build()
	},
	unsubscribe: func(b rueidis.Builder, chs []string) rueidis.Completed {
		return b.Sunsubscribe().Channel(chs...).Build()
	},
	subscribed:   "ssubscribe",
	unsubscribed: "sunsubscribe",
	group:        Slot,
}

// protocolFor picks the protocol for a client mode: sharded on a cluster,
// plain otherwise.
func protocolFor(mode rueidis.ClientMode) protocol {
	if mode == rueidis.ClientModeCluster {
		return shardedPubSub
	}
	return plainPubSub
}

// maxPerCommand bounds the channels in one SUBSCRIBE or UNSUBSCRIBE, so a
// reconnect with many channels sends several moderate commands.
const maxPerCommand = 512

// IdleLinger is how long a dedicated connection stays open with no channel
// on it before the Manager closes it; the next Subscribe dials again. An
// open connection costs the server a client and the process a keep-alive
// PING per rueidis Dialer.KeepAlive (a second by default) for nothing;
// waiters come and go in bursts, so a burst's connection outlives it by
// this long.
const IdleLinger = 30 * time.Second

// errIdle ends serve when the connection carried no channel for IdleLinger.
var errIdle = errors.New("pubsub: idle connection closed")

// run keeps the dedicated connection of sh until Close: it connects when
// some channel is placed on sh, serves the connection until it breaks, and
// waits the backoff on the injected clock before the next attempt.
func (m *Manager) run(sh *shard) {
	defer m.wg.Done()
	backoff := minBackoff
	failures := 0
	for {
		if !m.awaitDemand(sh) {
			return
		}
		healthy, err := m.serve(sh)
		select {
		case <-m.quit:
			return
		default:
		}
		if err == errIdle {
			backoff, failures = minBackoff, 0
			continue // closed on purpose: dial again on demand
		}
		if healthy {
			backoff, failures = minBackoff, 0
		}
		failures++
		if failures == 1 {
			m.cfg.Logger.Warn("holdfast/pubsub: connection lost; resubscribing after a backoff", "node", sh.addr, "err", err, "backoff", backoff)
		} else {
			m.cfg.Logger.Debug("holdfast/pubsub: reconnect failed", "node", sh.addr, "err", err, "attempt", failures, "backoff", backoff)
		}
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

// awaitDemand waits until some channel is placed on sh (true) or Close
// (false), so that a Manager nobody subscribes through holds no connection.
func (m *Manager) awaitDemand(sh *shard) bool {
	for {
		m.mu.Lock()
		wanted := sh.assigned > 0
		m.mu.Unlock()
		if wanted {
			return true
		}
		select {
		case <-sh.kick:
		case <-m.quit:
			return false
		}
	}
}

// serve runs one dedicated connection of sh until it breaks or Close.
// healthy reports whether Redis answered a command on it (which resets the
// backoff); err is why it ended.
func (m *Manager) serve(sh *shard) (healthy bool, err error) {
	// Dedicate dials here, synchronously; a dead server yields a wire whose
	// hooks channel reports the error at once.
	dc, _ := sh.client.Dedicate()
	// Close, not the release func: the wire carries subscriptions and is not
	// worth returning to the pool; Close also ends rueidis's goroutines for it.
	defer dc.Close()

	m.mu.Lock()
	sh.epoch++
	epoch := sh.epoch
	sh.connected = true
	for name, c := range m.channels {
		if c.shard == sh && len(c.listeners) > 0 {
			sh.dirty[name] = struct{}{}
		}
	}
	m.mu.Unlock()
	// Runs before dc.Close: hooks the close may still fire see a new epoch.
	defer m.disconnected(sh)

	var linger *clock.Timer
	defer func() {
		if linger != nil {
			linger.Stop()
		}
	}()
	broken := dc.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage:      func(msg rueidis.PubSubMessage) { m.onMessage(sh, epoch, msg) },
		OnSubscription: func(s rueidis.PubSubSubscription) { m.onSubscription(sh, epoch, s) },
	})
	for {
		subs, unsubs := m.takeDirty(sh)
		for _, batch := range [...]struct {
			names []string
			build func(rueidis.Builder, []string) rueidis.Completed
		}{{subs, m.proto.subscribe}, {unsubs, m.proto.unsubscribe}} {
			for _, cmd := range m.commands(batch.names) {
				// rueidis returns once Redis answered the first channel;
				// the confirmations arrive through onSubscription.
				err := dc.Do(m.ctx, batch.build(dc.B(), cmd)).Error()
				if _, ok := rueidis.IsRedisErr(err); ok && m.cluster {
					// MOVED, ASK, CLUSTERDOWN: this master does not serve
					// the slot (now); the router places the channels again.
					healthy = true
					m.reroute(sh, epoch, cmd)
					continue
				}
				if err != nil {
					return healthy, err
				}
				healthy = true
			}
		}
		// With no channel left on the connection, a timer on the injected
		// clock closes it after IdleLinger.
		var idle <-chan time.Time
		m.mu.Lock()
		if sh.assigned == 0 {
			if linger == nil {
				linger = m.cfg.Clock.Timer(IdleLinger)
			}
			idle = linger.C
		} else if linger != nil {
			linger.Stop()
			linger = nil
		}
		m.mu.Unlock()
		select {
		case <-sh.kick:
		case <-idle:
			linger = nil
			m.mu.Lock()
			still := sh.assigned == 0
			m.mu.Unlock()
			if still {
				return healthy, errIdle
			}
		case err := <-broken:
			if err == nil {
				err = errors.New("pub/sub hooks closed")
			}
			return healthy, err
		case <-m.quit:
			return healthy, nil
		}
	}
}

// commands cuts names into the channel lists of single commands: at most
// maxPerCommand each, one slot each for sharded pub/sub.
func (m *Manager) commands(names []string) [][]string {
	if len(names) == 0 {
		return nil
	}
	groups := map[uint16][]string{}
	var order []uint16
	for _, n := range names {
		g := m.proto.group(n)
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], n)
	}
	var out [][]string
	for _, g := range order {
		for chs := groups[g]; len(chs) > 0; {
			n := min(len(chs), maxPerCommand)
			out = append(out, chs[:n])
			chs = chs[n:]
		}
	}
	return out
}

// takeDirty returns the channels to subscribe and to unsubscribe to bring
// the connection of sh to the wanted state, and records them as sent.
func (m *Manager) takeDirty(sh *shard) (subs, unsubs []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name := range sh.dirty {
		delete(sh.dirty, name)
		c := m.channels[name]
		if c == nil || c.shard != sh {
			continue
		}
		switch wanted := len(c.listeners) > 0; {
		case wanted && !c.sent:
			subs = append(subs, name)
		case !wanted && c.sent:
			unsubs = append(unsubs, name)
		default:
			continue
		}
		c.sent = !c.sent
		c.inflight++
		c.confirmed = false
	}
	return subs, unsubs
}

// disconnected forgets the connection's state: nothing is subscribed on it
// any more, channels without listeners are dropped, and listeners already
// told Subscribed are told Lost, and Resync once their channel is confirmed
// again. On a cluster the channels go back to the router: their master may
// have failed over.
func (m *Manager) disconnected(sh *shard) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sh.epoch++
	sh.connected = false
	clear(sh.dirty)
	for _, c := range m.channels {
		if c.shard != sh {
			continue
		}
		if len(c.listeners) == 0 {
			m.dropLocked(c)
			continue
		}
		if !m.closed {
			m.lostLocked(c)
		}
		if m.cluster {
			m.unplaceLocked(c)
			m.markDirtyLocked(c)
			m.staleLocked()
			continue
		}
		c.sent, c.inflight, c.confirmed = false, 0, false
	}
}

// reroute takes the channels of a refused command off sh, for the router.
func (m *Manager) reroute(sh *shard, epoch uint64, names []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if epoch != sh.epoch {
		return
	}
	for _, name := range names {
		c := m.channels[name]
		if c == nil || c.shard != sh {
			continue
		}
		m.unplaceLocked(c)
		if len(c.listeners) == 0 {
			m.dropLocked(c)
			continue
		}
		m.markDirtyLocked(c)
	}
	m.staleLocked()
}

// onSubscription runs on rueidis's reader goroutine for every subscribe and
// unsubscribe confirmation.
func (m *Manager) onSubscription(sh *shard, epoch uint64, s rueidis.PubSubSubscription) {
	if s.Kind != m.proto.subscribed && s.Kind != m.proto.unsubscribed {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if epoch != sh.epoch {
		return
	}
	c := m.channels[s.Channel]
	if c == nil || c.shard != sh {
		return
	}
	if c.inflight == 0 {
		if s.Kind == m.proto.unsubscribed && c.sent && m.cluster {
			// Not asked for: the slot left this master. The router
			// places the channel on the slot's new master.
			m.unplaceLocked(c)
			if len(c.listeners) == 0 {
				m.dropLocked(c)
				return
			}
			m.markDirtyLocked(c)
			m.staleLocked()
		}
		return // not asked for (a plain-Redis server never sends one)
	}
	if c.inflight--; c.inflight > 0 {
		return // a later command for it is still on the way
	}
	switch {
	case c.sent:
		c.confirmed = true
		m.tellAllLocked(c)
	case len(c.listeners) == 0:
		m.dropLocked(c)
	}
	// Otherwise unsubscribed while a listener came back: it is dirty and
	// the connection goroutine subscribes it again.
}

// onMessage runs on rueidis's reader goroutine for every message.
func (m *Manager) onMessage(sh *shard, epoch uint64, msg rueidis.PubSubMessage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if epoch != sh.epoch {
		return
	}
	c := m.channels[msg.Channel]
	if c == nil {
		return
	}
	for l := range c.listeners {
		// A listener not yet told Subscribed will be, and re-checks Redis
		// then; a Message before it would break the order promised.
		if l.toldLocked {
			m.postLocked(l, Message)
		}
	}
}
