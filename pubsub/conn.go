package pubsub

import (
	"errors"

	"github.com/redis/rueidis"
)

// protocol is what differs between plain and sharded pub/sub: the commands
// and the push kinds that confirm them.
type protocol struct {
	subscribe    func(b rueidis.Builder, channels []string) rueidis.Completed
	unsubscribe  func(b rueidis.Builder, channels []string) rueidis.Completed
	subscribed   string // push kind confirming subscribe
	unsubscribed string // push kind confirming unsubscribe
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
}

// protocolFor picks the protocol for a client mode. Every mode uses plain
// SUBSCRIBE for now. Sharded pub/sub for rueidis.ClientModeCluster would be
// SSUBSCRIBE/SUNSUBSCRIBE with "ssubscribe"/"sunsubscribe" confirmations,
// but only together with one connection per shard (a connection goroutine
// per node, channels routed by slot), SPUBLISH in the scripts, and handling
// of the sunsubscribe Redis sends unasked when a slot migrates (resubscribe
// on the new owner, then Resync).
func protocolFor(rueidis.ClientMode) protocol { return plainPubSub }

// maxPerCommand bounds the channels in one SUBSCRIBE or UNSUBSCRIBE, so a
// reconnect with many channels sends several moderate commands.
const maxPerCommand = 512

// run keeps the dedicated connection until Close: it connects when some
// channel is wanted, serves the connection until it breaks, and waits the
// backoff on the injected clock before the next attempt.
func (m *Manager) run() {
	defer m.wg.Done()
	backoff := minBackoff
	failures := 0
	for {
		if !m.awaitDemand() {
			return
		}
		healthy, err := m.serve()
		select {
		case <-m.quit:
			return
		default:
		}
		if healthy {
			backoff, failures = minBackoff, 0
		}
		failures++
		if failures == 1 {
			m.cfg.Logger.Warn("holdfast/pubsub: connection lost; resubscribing after a backoff", "err", err, "backoff", backoff)
		} else {
			m.cfg.Logger.Debug("holdfast/pubsub: reconnect failed", "err", err, "attempt", failures, "backoff", backoff)
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

// awaitDemand waits until some channel has listeners (true) or Close
// (false), so that a Manager nobody subscribes through holds no connection.
func (m *Manager) awaitDemand() bool {
	for {
		m.mu.Lock()
		wanted := len(m.channels) > 0
		m.mu.Unlock()
		if wanted {
			return true
		}
		select {
		case <-m.kick:
		case <-m.quit:
			return false
		}
	}
}

// serve runs one dedicated connection until it breaks or Close. healthy
// reports whether Redis answered a command on it (which resets the backoff);
// err is why it ended.
func (m *Manager) serve() (healthy bool, err error) {
	// Dedicate dials here, synchronously; a dead server yields a wire whose
	// hooks channel reports the error at once.
	dc, _ := m.cfg.Redis.Dedicate()
	// Close, not the release func: the wire carries subscriptions and is not
	// worth returning to the pool; Close also ends rueidis's goroutines for it.
	defer dc.Close()

	m.mu.Lock()
	m.epoch++
	epoch := m.epoch
	m.connected = true
	for name, c := range m.channels {
		if len(c.listeners) > 0 {
			m.dirty[name] = struct{}{}
		}
	}
	m.mu.Unlock()
	// Runs before dc.Close: hooks the close may still fire see a new epoch.
	defer m.disconnected()

	broken := dc.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage:      func(msg rueidis.PubSubMessage) { m.onMessage(epoch, msg) },
		OnSubscription: func(s rueidis.PubSubSubscription) { m.onSubscription(epoch, s) },
	})
	for {
		subs, unsubs := m.takeDirty()
		for _, batch := range [...]struct {
			names []string
			build func(rueidis.Builder, []string) rueidis.Completed
		}{{subs, m.proto.subscribe}, {unsubs, m.proto.unsubscribe}} {
			for len(batch.names) > 0 {
				n := min(len(batch.names), maxPerCommand)
				// rueidis returns once Redis answered the first channel;
				// the confirmations arrive through onSubscription.
				if err := dc.Do(m.ctx, batch.build(dc.B(), batch.names[:n])).Error(); err != nil {
					return healthy, err
				}
				healthy = true
				batch.names = batch.names[n:]
			}
		}
		select {
		case <-m.kick:
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

// takeDirty returns the channels to subscribe and to unsubscribe to bring
// the connection to the wanted state, and records them as sent.
func (m *Manager) takeDirty() (subs, unsubs []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name := range m.dirty {
		delete(m.dirty, name)
		c := m.channels[name]
		if c == nil {
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

// disconnected forgets the connection's state: nothing is subscribed any
// more, channels without listeners are dropped, and listeners already told
// Subscribed will be told Resync once their channel is confirmed again.
func (m *Manager) disconnected() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.epoch++
	m.connected = false
	clear(m.dirty)
	for name, c := range m.channels {
		c.sent, c.inflight, c.confirmed = false, 0, false
		if len(c.listeners) == 0 {
			delete(m.channels, name)
		}
	}
}

// onSubscription runs on rueidis's reader goroutine for every subscribe and
// unsubscribe confirmation.
func (m *Manager) onSubscription(epoch uint64, s rueidis.PubSubSubscription) {
	if s.Kind != m.proto.subscribed && s.Kind != m.proto.unsubscribed {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if epoch != m.epoch {
		return
	}
	c := m.channels[s.Channel]
	if c == nil || c.inflight == 0 {
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
		delete(m.channels, c.name)
	}
	// Otherwise unsubscribed while a listener came back: it is dirty and
	// the connection goroutine subscribes it again.
}

// onMessage runs on rueidis's reader goroutine for every message.
func (m *Manager) onMessage(epoch uint64, msg rueidis.PubSubMessage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if epoch != m.epoch {
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
