// Package pubsub keeps one subscription per channel per holdfast Client,
// reference-counted, on one dedicated Redis connection. Lock actors listen on
// their lock's channel to be woken when the lock is released, instead of
// polling.
//
// # Concurrency
//
// A Manager owns one goroutine, which keeps the dedicated connection: it
// connects, sends SUBSCRIBE and UNSUBSCRIBE as listeners come and go, and on
// a broken connection reconnects with a backoff on the injected clock,
// resubscribes every channel that still has listeners and tells their
// listeners to re-check Redis (Resync), because messages published during
// the gap are gone. Listener functions are called from rueidis's hook
// goroutine or the Manager's goroutine; calls for one listener never
// overlap, and once its unsubscribe function has returned it is never
// called again. They must not block.
//
// Standalone Redis and Sentinel use SUBSCRIBE. On a cluster the seam is
// subscribeCmd/unsubscribeCmd: sharded pub/sub (SSUBSCRIBE) needs one
// dedicated connection per shard, which this package does not do yet.
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
	// Subscribed: Redis confirmed the subscription; messages from now on
	// will be delivered. Sent once to each listener.
	Subscribed Event = iota
	// Message: a message arrived on the channel.
	Message
	// Resync: the connection was lost and is back, the channel resubscribed;
	// messages may have been missed, so re-check Redis now.
	Resync
)

// Config configures a Manager.
type Config struct {
	Redis  rueidis.Client
	Clock  clock.Clock  // for the reconnect backoff; default clock.New()
	Logger *slog.Logger // default: discard
}

const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = time.Second
)

// Manager multiplexes channel subscriptions over one dedicated connection.
type Manager struct {
	cfg  Config
	kick chan struct{} // wakes the goroutine: the wanted set changed
	quit chan struct{}
	// ctx bounds the goroutine's commands; Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex // guards the fields below
	channels map[string]*channel
	// subscribed: channels Redis confirmed on the current connection.
	subscribed map[string]struct{}
	closed     bool
}

type channel struct {
	listeners map[*listener]struct{}
	sent      bool // SUBSCRIBE sent on the current connection
	confirmed bool // Redis confirmed it on the current connection
}

type listener struct {
	fn        func(Event)
	mu        sync.Mutex // serialises calls of fn and guards removed, confirmed
	removed   bool
	confirmed bool // has been told Subscribed
}

// New returns a Manager and starts its goroutine.
func New(cfg Config) *Manager {
	if cfg.Clock == nil {
		cfg.Clock = clock.New()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		ctx:        ctx,
		cancel:     cancel,
		cfg:        cfg,
		kick:       make(chan struct{}, 1),
		quit:       make(chan struct{}),
		done:       make(chan struct{}),
		channels:   make(map[string]*channel),
		subscribed: make(map[string]struct{}),
	}
	go m.run()
	return m
}

// Subscribe adds fn as a listener of ch and returns the function that
// removes it (idempotent). The first listener of a channel makes the
// Manager SUBSCRIBE; the last removal makes it UNSUBSCRIBE.
func (m *Manager) Subscribe(ch string, fn func(Event)) (unsubscribe func()) {
	l := &listener{fn: fn}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return func() {}
	}
	c := m.channels[ch]
	if c == nil {
		c = &channel{listeners: make(map[*listener]struct{})}
		m.channels[ch] = c
	}
	c.listeners[l] = struct{}{}
	confirmed := c.confirmed
	m.mu.Unlock()
	if confirmed {
		l.tell(Subscribed)
	} else {
		m.wake()
	}
	return func() { m.remove(ch, l) }
}

func (m *Manager) remove(ch string, l *listener) {
	l.mu.Lock()
	l.removed = true
	l.mu.Unlock()
	m.mu.Lock()
	if c := m.channels[ch]; c != nil {
		delete(c.listeners, l)
		if len(c.listeners) == 0 {
			delete(m.channels, ch)
			if c.sent {
				m.mu.Unlock()
				m.wake()
				return
			}
		}
	}
	m.mu.Unlock()
}

// tell calls the listener's function unless it was removed.
func (l *listener) tell(ev Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.removed {
		return
	}
	if ev == Subscribed || ev == Resync {
		if l.confirmed {
			ev = Resync
		} else {
			ev = Subscribed
		}
		l.confirmed = true
	}
	l.fn(ev)
}

func (m *Manager) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Channels reports how many channels have listeners.
func (m *Manager) Channels() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.channels)
}

// Close unsubscribes everything, closes the dedicated connection, and stops
// and waits for the Manager's goroutine. Listeners are not called after
// Close returns.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		<-m.done
		return
	}
	m.closed = true
	for _, c := range m.channels {
		for l := range c.listeners {
			l.mu.Lock()
			l.removed = true
			l.mu.Unlock()
		}
	}
	m.channels = make(map[string]*channel)
	m.mu.Unlock()
	close(m.quit)
	m.cancel()
	<-m.done
}

// run keeps the dedicated connection until Close.
func (m *Manager) run() {
	defer close(m.done)
	backoff := minBackoff
	for {
		dc, release := m.cfg.Redis.Dedicate()
		broken := dc.SetPubSubHooks(rueidis.PubSubHooks{
			OnMessage:      m.onMessage,
			OnSubscription: m.onSubscription,
		})
		ok := m.serve(dc, broken)
		dc.SetPubSubHooks(rueidis.PubSubHooks{})
		release()
		dc.Close()
		if !ok {
			return
		}
		m.cfg.Logger.Warn("holdfast: pub/sub connection lost; reconnecting", "backoff", backoff)
		select {
		case <-m.quit:
			return
		case <-m.cfg.Clock.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// serve runs one connection until it breaks (true) or Close (false).
func (m *Manager) serve(dc rueidis.DedicatedClient, broken <-chan error) bool {
	m.mu.Lock()
	for _, c := range m.channels {
		c.sent, c.confirmed = false, false
	}
	clear(m.subscribed)
	m.mu.Unlock()
	for {
		if !m.sync(dc) {
			// A failed command means a broken connection; its channel says so.
			select {
			case <-broken:
				return true
			case <-m.quit:
				return false
			}
		}
		select {
		case <-m.kick:
		case err := <-broken:
			m.cfg.Logger.Debug("holdfast: pub/sub connection ended", "err", err)
			return true
		case <-m.quit:
			return false
		}
	}
}

// sync sends SUBSCRIBE for wanted channels not yet sent and UNSUBSCRIBE for
// sent channels no longer wanted.
func (m *Manager) sync(dc rueidis.DedicatedClient) bool {
	m.mu.Lock()
	var subs []string
	for name, c := range m.channels {
		if !c.sent {
			c.sent = true
			subs = append(subs, name)
		}
	}
	m.mu.Unlock()
	ctx := m.ctx
	if len(subs) > 0 {
		if err := dc.Do(ctx, dc.B().Subscribe().Channel(subs...).Build()).Error(); err != nil {
			m.cfg.Logger.Debug("holdfast: SUBSCRIBE failed", "err", err)
			return false
		}
	}
	// Unsubscribe what lost its last listener: the channels Redis confirmed
	// that are no longer wanted are tracked on the connection side.
	m.mu.Lock()
	var unsubs []string
	for name := range m.subscribed {
		if _, wanted := m.channels[name]; !wanted {
			unsubs = append(unsubs, name)
			delete(m.subscribed, name)
		}
	}
	m.mu.Unlock()
	if len(unsubs) > 0 {
		if err := dc.Do(ctx, dc.B().Unsubscribe().Channel(unsubs...).Build()).Error(); err != nil {
			return false
		}
	}
	return true
}

func (m *Manager) onSubscription(s rueidis.PubSubSubscription) {
	if s.Kind != "subscribe" {
		return
	}
	m.mu.Lock()
	m.subscribed[s.Channel] = struct{}{}
	c := m.channels[s.Channel]
	if c == nil {
		m.mu.Unlock()
		m.wake() // confirmed after its last listener left: unsubscribe
		return
	}
	c.confirmed = true
	ls := make([]*listener, 0, len(c.listeners))
	for l := range c.listeners {
		ls = append(ls, l)
	}
	m.mu.Unlock()
	for _, l := range ls {
		l.tell(Subscribed)
	}
}

func (m *Manager) onMessage(msg rueidis.PubSubMessage) {
	m.mu.Lock()
	c := m.channels[msg.Channel]
	if c == nil {
		m.mu.Unlock()
		return
	}
	ls := make([]*listener, 0, len(c.listeners))
	for l := range c.listeners {
		ls = append(ls, l)
	}
	m.mu.Unlock()
	for _, l := range ls {
		l.tell(Message)
	}
}
