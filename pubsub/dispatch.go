package pubsub

import "sync"

// listener is one Subscribe call.
type listener struct {
	fn func(Event)
	ch *channel // never changes

	// mu is held while fn runs; it serialises the calls and orders them
	// with unsubscribe.
	mu      sync.Mutex
	removed bool // guarded by mu

	// Guarded by Manager.mu.
	toldLocked    bool   // Subscribed has been queued; later confirmations are Resync
	pendingLocked events // queued and not yet taken by the dispatcher
	queuedLocked  bool   // in Manager.queue
}

// events is a set of pending events; kinds merge.
type events uint8

func (s events) has(e Event) bool { return s&(1<<e) != 0 }

// deliveryOrder is the order in which one batch of a listener's events is
// delivered: Subscribed is always first; a Lost and a Resync that merged
// come in the order of a loss and its recovery (events are hints: a
// listener re-checks Redis on either).
var deliveryOrder = [...]Event{Subscribed, Lost, Resync, Message}

// postLocked queues ev for l and wakes the dispatcher.
func (m *Manager) postLocked(l *listener, ev Event) {
	l.pendingLocked |= 1 << ev
	if l.queuedLocked {
		return
	}
	l.queuedLocked = true
	m.queue = append(m.queue, l)
	select {
	case m.ready <- struct{}{}:
	default:
	}
}

// tellAllLocked queues, for each listener of c, Subscribed if it has not
// been told yet, else Resync.
func (m *Manager) tellAllLocked(c *channel) {
	for l := range c.listeners {
		if l.toldLocked {
			m.postLocked(l, Resync)
		} else {
			l.toldLocked = true
			m.postLocked(l, Subscribed)
		}
	}
}

// lostLocked tells c's listeners that were told Subscribed that its
// connection broke, if the subscription was confirmed on it.
func (m *Manager) lostLocked(c *channel) {
	if !c.confirmed {
		return
	}
	for l := range c.listeners {
		if l.toldLocked {
			m.postLocked(l, Lost)
		}
	}
}

type delivery struct {
	l  *listener
	ev events
}

// dispatch calls listener functions until Close. It is the only goroutine
// that does, so calls never overlap and a slow listener delays the others
// but never the connection.
func (m *Manager) dispatch() {
	defer m.wg.Done()
	var batch []delivery
	for {
		select {
		case <-m.ready:
		case <-m.quit:
			return
		}
		m.mu.Lock()
		for _, l := range m.queue {
			batch = append(batch, delivery{l, l.pendingLocked})
			l.pendingLocked, l.queuedLocked = 0, false
		}
		clear(m.queue)
		m.queue = m.queue[:0]
		m.mu.Unlock()

		for i, d := range batch {
			select {
			case <-m.quit:
				return
			default:
			}
			d.l.deliver(d.ev)
			batch[i] = delivery{}
		}
		batch = batch[:0]
	}
}

// deliver calls l's function for each event in s, unless l was removed.
func (l *listener) deliver(s events) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ev := range deliveryOrder {
		if s.has(ev) && !l.removed {
			l.fn(ev)
		}
	}
}
