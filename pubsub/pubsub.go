// Package pubsub keeps one Redis subscription per channel per process,
// reference-counted. Lock actors listen on their lock's channel to be woken
// when the lock is released, instead of polling. It is holdfast's machinery,
// importable only because the module keeps its packages at the top level:
// it has no compatibility promise and may change in any release. Use
// package holdfast.
//
// The first listener of a channel makes the Manager SUBSCRIBE, the last one
// to leave makes it UNSUBSCRIBE; listeners in between share the subscription.
// Once Redis confirms a subscription its listeners are told Subscribed; when
// its connection breaks, Lost; when the channel is subscribed again, Resync:
// messages published during the gap are gone, so they must re-check Redis.
//
// # Transports
//
// Outside a cluster, the first SharedChannels channels subscribed at once
// ride the client's own connection (rueidis's Receive; over RESP3 the same
// connection that carries the commands): no connection, handshake or
// keep-alive of the Manager's own. Each costs a goroutine while it is
// subscribed (shared.go); rueidis reconnects it, and a refused SUBSCRIBE is
// tried again after a backoff on the injected clock.
//
// The channels beyond, and all of them with Config.Dedicated, go to one
// dedicated connection, dialled at the first such channel and closed once
// no channel has been on it for IdleLinger of the injected clock; the next
// channel dials again. When that connection breaks, the Manager reconnects
// with a backoff on the injected clock and resubscribes every channel that
// still has listeners.
//
// # Concurrency
//
// New starts two goroutines, both owned by the Manager and both ended and
// waited for by Close:
//
//   - the connection goroutine dials the dedicated connection, sends
//     SUBSCRIBE and UNSUBSCRIBE as listeners come and go, reconnects, and
//     closes the connection when it has been idle for IdleLinger;
//   - the dispatcher, the only goroutine that calls listener functions.
//
// A channel on the shared transport has a goroutine of the Manager's from
// its first listener until its UNSUBSCRIBE is answered (or its connection
// is gone); Close ends and waits for those too.
//
// rueidis reads the connections on goroutines of its own and calls the
// Manager's hooks there; the hooks only record events under the mutex, so
// user code never runs on, or stalls, a connection. The rueidis goroutines
// of the dedicated connection end when Close closes it; those of the
// client's own connection are the client's.
//
// For each listener:
//
//   - calls of its function never overlap;
//   - the first call is Subscribed, after Redis confirmed the subscription;
//   - once its unsubscribe function has returned, it is never called again.
//     An unsubscribe that races with a call in progress waits for that call
//     to return, so a listener function must not call its own unsubscribe,
//     nor Close: either would deadlock. Post to a mailbox instead.
//
// Events are hints and merge: events of one kind that are pending for a
// listener are delivered once (a burst of messages may arrive as one
// Message), the way a 1-buffered notification channel merges signals.
//
// # Cluster
//
// Standalone Redis and Sentinel use plain SUBSCRIBE. On a
// Redis Cluster (a rueidis cluster client) the Manager uses sharded pub/sub:
// SSUBSCRIBE, which the scripts pair with SPUBLISH, so a release is sent to
// the shard of its lock alone instead of being broadcast to every node. It
// keeps one dedicated connection per master that serves a slot with
// listeners, each with its own connection goroutine, and a router goroutine
// that maps channels to masters by slot (CLUSTER SHARDS). When a slot moves,
// the master it left drops the channel (an unasked SUNSUBSCRIBE) or refuses
// it (MOVED); when a master fails, its connection breaks. Either way the
// channel goes back to the router, which reads the slot map again and
// subscribes it on the slot's master; its listeners are then told Resync.
package pubsub

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/redis/rueidis"
)

// Event is what a listener is told.
type Event int

const (
	// Subscribed: Redis confirmed the subscription. Every message published
	// from now on, while the connection lasts, is delivered; anything
	// published before may have been missed, so check Redis now. It is the
	// first event of every listener and is sent once.
	Subscribed Event = iota
	// Message: a message arrived on the channel.
	Message
	// Resync: the connection was lost and re-established and the channel
	// resubscribed: messages may have been missed, so re-check Redis now.
	Resync
	// Lost: the connection that carried the channel's subscription broke
	// (Redis restarted or went away, or the network failed); messages are
	// missed until Resync. Only a listener told Subscribed is told Lost. A
	// listener that needs no more than Resync may ignore it; one that
	// reports whether Redis can be reached reads Redis now.
	Lost
)

func (e Event) String() string {
	switch e {
	case Subscribed:
		return "Subscribed"
	case Message:
		return "Message"
	case Resync:
		return "Resync"
	case Lost:
		return "Lost"
	}
	return "Event(?)"
}

// Config configures a Manager.
type Config struct {
	// Redis is the client subscriptions are made through. Required.
	Redis rueidis.Client
	// Dedicated makes a Manager outside a cluster subscribe every channel
	// on its connection of its own (Dedicate), as it does on each master
	// of a cluster, instead of its first SharedChannels channels with
	// Receive on the client's connection.
	Dedicated bool
	// Clock drives the reconnect backoff. Default: the real clock.
	Clock clock.Clock
	// Logger receives connection losses and reconnects. Default: discard.
	Logger *slog.Logger
}

// Reconnect backoff: the first retry after a loss waits minBackoff, each
// failed attempt doubles it up to maxBackoff, a working connection resets it.
const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = time.Second
)

// Manager multiplexes channel subscriptions over dedicated connections: one,
// or one per cluster master. Create it with New; it is safe for concurrent
// use.
type Manager struct {
	cfg     Config
	proto   protocol
	cluster bool
	shared  bool // the first SharedChannels channels use the shared transport (shared.go)

	ready chan struct{} // 1-buffered: events are queued (dispatcher)
	quit  chan struct{} // closed by Close
	// ctx bounds the commands of the connection goroutines; Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the Manager's goroutines

	mu sync.Mutex // guards the fields below, the shards' and the *Locked fields of channel and listener
	// channels holds every channel with listeners or with a subscription
	// on a current connection that is not yet undone.
	channels map[string]*channel
	// single is the only shard outside a cluster; shards holds a cluster's,
	// by master address.
	single *shard
	shards map[string]*shard
	// unrouted (cluster) names the channels the router must place on a
	// shard; routeKick (1-buffered) wakes the router.
	unrouted  map[string]struct{}
	routeKick chan struct{}
	staleMap  bool        // the router must read the slot map again
	nShared   int         // channels on the shared transport
	queue     []*listener // listeners with pending events, in order
	closed    bool
}

// shard is one dedicated connection and what was sent on it. Its fields are
// guarded by Manager.mu, but for the ones set once by newShard.
type shard struct {
	addr   string
	client rueidis.Client // the connection is dedicated from it
	kick   chan struct{}  // 1-buffered: the wanted set changed (its connection goroutine)
	// dirty names the channels of this shard whose wanted state may differ
	// from what was last sent on the connection.
	dirty map[string]struct{}
	// epoch numbers connections; hooks of an older one are ignored.
	epoch uint64
	// connected is true while serve holds a connection. Only the tests read
	// it (export_test.go), to wait until a killed server has been noticed.
	connected bool
	// assigned counts the channels placed on this shard.
	assigned int
}

func newShard(addr string, client rueidis.Client) *shard {
	return &shard{addr: addr, client: client, kick: make(chan struct{}, 1), dirty: make(map[string]struct{})}
}

// channel is one Redis channel: its listeners and its state on the current
// connection. All fields are guarded by Manager.mu.
type channel struct {
	name      string
	listeners map[*listener]struct{}
	// sent: the last command sent for it on this connection was SUBSCRIBE,
	// so Redis is, or will be, subscribed.
	sent bool
	// inflight counts SUBSCRIBE and UNSUBSCRIBE sent and not yet confirmed.
	// Redis answers in order, so when it drops to zero the server's state
	// is the one sent last.
	inflight int
	// confirmed: sent, and Redis confirmed it with nothing in flight.
	confirmed bool
	// shard is the connection the channel is on or going to; nil for a
	// cluster channel the router has not placed yet, and under the shared
	// transport.
	shard *shard

	// The shared transport: receiving while its goroutine runs (from the
	// channel's creation to its drop); round numbers its calls of
	// Receive and cancel ends the current one; roundHealthy: Redis
	// confirmed the current round's SUBSCRIBE at least once; leaveTimer,
	// while set: the last listener left before Redis confirmed the round's
	// subscription, and it cancels the round unless the confirmation does
	// first.
	receiving    bool
	round        uint64
	cancel       context.CancelFunc
	roundHealthy bool
	leaveTimer   *clock.Timer
}

// New returns a Manager and starts its goroutines. It dials nothing until
// the first Subscribe.
func New(cfg Config) *Manager {
	if cfg.Redis == nil {
		panic("pubsub: Config.Redis is nil")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.New()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		cfg:       cfg,
		proto:     protocolFor(cfg.Redis.Mode()),
		cluster:   cfg.Redis.Mode() == rueidis.ClientModeCluster,
		shared:    cfg.Redis.Mode() != rueidis.ClientModeCluster && !cfg.Dedicated,
		ready:     make(chan struct{}, 1),
		quit:      make(chan struct{}),
		ctx:       ctx,
		cancel:    cancel,
		channels:  make(map[string]*channel),
		shards:    make(map[string]*shard),
		unrouted:  make(map[string]struct{}),
		routeKick: make(chan struct{}, 1),
	}
	m.wg.Add(2)
	if m.cluster {
		go m.route()
	} else {
		// Dials only once a channel is placed on it.
		m.single = newShard("", cfg.Redis)
		go m.run(m.single)
	}
	go m.dispatch()
	return m
}

// Subscribe adds fn as a listener of channel and returns the function that
// removes it. The first listener of a channel makes the Manager SUBSCRIBE,
// the last removal makes it UNSUBSCRIBE. fn is first called with Subscribed
// once Redis has confirmed the subscription (soon, if it already had), then
// with Message, Lost and Resync; see the package doc for the guarantees. fn is
// called from the Manager's dispatcher goroutine and must not block.
//
// The returned function is idempotent and safe to call from any goroutine
// except from inside fn itself. Once it returns, fn is never called again.
// After Close, Subscribe does nothing and returns a no-op.
func (m *Manager) Subscribe(channelName string, fn func(Event)) (unsubscribe func()) {
	if fn == nil {
		panic("pubsub: Subscribe with a nil listener")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return func() {}
	}
	c := m.channels[channelName]
	if c == nil {
		c = &channel{name: channelName, listeners: make(map[*listener]struct{})}
		m.channels[channelName] = c
		switch {
		case m.shared && m.nShared < SharedChannels:
			m.startReceiveLocked(c)
		case m.single != nil:
			m.placeLocked(c, m.single)
		}
	}
	l := &listener{fn: fn, ch: c}
	c.listeners[l] = struct{}{}
	if c.leaveTimer != nil {
		m.stayLocked(c)
	}
	if !c.receiving && len(c.listeners) == 1 {
		m.markDirtyLocked(c)
	}
	if c.confirmed {
		l.toldLocked = true
		m.postLocked(l, Subscribed)
	}
	return func() { m.unsubscribe(l) }
}

func (m *Manager) unsubscribe(l *listener) {
	// Marking the listener removed under its own mutex is what makes the
	// guarantee: the dispatcher checks the mark under that mutex before
	// every call, and a call in progress holds it.
	l.mu.Lock()
	if l.removed {
		l.mu.Unlock()
		return
	}
	l.removed = true
	l.mu.Unlock()

	m.mu.Lock()
	defer m.mu.Unlock()
	c := l.ch
	if _, ok := c.listeners[l]; !ok || m.channels[c.name] != c {
		return // Close dropped it
	}
	delete(c.listeners, l)
	if len(c.listeners) > 0 {
		return
	}
	if c.receiving {
		m.leaveSharedLocked(c)
		return
	}
	if !c.sent && c.inflight == 0 {
		m.dropLocked(c) // nothing on the server to undo
		return
	}
	m.markDirtyLocked(c)
}

// markDirtyLocked records that c's wanted state changed and wakes the
// connection goroutine of its shard, or the router.
func (m *Manager) markDirtyLocked(c *channel) {
	if c.shard == nil {
		m.unrouted[c.name] = struct{}{}
		poke(m.routeKick)
		return
	}
	c.shard.dirty[c.name] = struct{}{}
	poke(c.shard.kick)
}

// placeLocked puts c on shard sh.
func (m *Manager) placeLocked(c *channel, sh *shard) {
	c.shard = sh
	sh.assigned++
}

// unplaceLocked takes c off its shard: nothing of it is on a connection any
// more.
func (m *Manager) unplaceLocked(c *channel) {
	if c.shard != nil {
		c.shard.assigned--
		delete(c.shard.dirty, c.name)
		c.shard = nil
	}
	c.sent, c.inflight, c.confirmed = false, 0, false
}

// dropLocked forgets c, which has no listeners and nothing on the server.
func (m *Manager) dropLocked(c *channel) {
	if c.shard != nil {
		c.shard.assigned--
		delete(c.shard.dirty, c.name)
	}
	delete(m.channels, c.name)
	delete(m.unrouted, c.name)
}

// poke wakes the goroutine behind a 1-buffered channel.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Channels reports how many channels have listeners or are still subscribed
// on the server (an UNSUBSCRIBE not yet confirmed). It drops to zero once
// every listener has unsubscribed and Redis has confirmed the UNSUBSCRIBEs,
// or the connection is gone. It is meant for leak checks.
func (m *Manager) Channels() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.channels)
}

// Close drops every listener, closes the dedicated connection (which ends
// its subscriptions on the server), unsubscribes the channels on the
// client's connection, and stops and waits for the Manager's goroutines.
// No listener function is called after Close returns. Close is idempotent;
// a dial in progress delays it by up to the client's dial timeout, a silent
// server by about a second (rueidis closing the pipe; unsubscribeWait).
func (m *Manager) Close() {
	m.mu.Lock()
	if !m.closed {
		m.closed = true
		close(m.quit)
		m.cancel()
	}
	m.mu.Unlock()
	m.wg.Wait()

	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.channels)
	clear(m.unrouted)
	clear(m.shards)
	clear(m.queue)
	m.queue = m.queue[:0]
}
