package pubsub

import (
	"context"
	"errors"
	"time"

	"github.com/redis/rueidis"
)

// The shared transport (standalone Redis and Sentinel, unless
// Config.Dedicated): each channel is subscribed with rueidis's Receive on
// the client's own connection, so a Manager opens no connection of its own
// and pays no handshake or keep-alive for one. Over RESP3 the subscription
// rides the connection that carries the client's commands; over RESP2
// rueidis keeps one pub/sub connection of its own for the client.
//
// rueidis's Receive serves a fixed set of channels and blocks until they
// are unsubscribed, so a channel gets one goroutine (receive) for as long as
// it is subscribed: from its first listener until Redis has confirmed its
// UNSUBSCRIBE, or its connection is gone. Each call of Receive is a round.
// A round ends when the channel's last listener leaves (its context is
// cancelled; once Receive has returned, UNSUBSCRIBE goes on the connection
// the round used, before the goroutine may drop the channel), when the
// connection breaks (rueidis's own retries resubscribe on a new connection
// within the round, and the return hook marks the channel unconfirmed in
// between), or when Redis refuses the SUBSCRIBE or someone else
// unsubscribes the channel (the next round waits the backoff on the
// injected clock).

// errUnsubscribed is logged when a round ended without its context being
// cancelled and without an error: someone else unsubscribed the channel.
var errUnsubscribed = errors.New("the channel was unsubscribed by someone else")

// SharedChannels bounds the channels a Manager outside a cluster keeps on
// the shared transport at once; the channels beyond go to its dedicated
// connection. A channel on the shared transport costs a goroutine and
// rueidis's buffer for it, about 7 KiB against well under 1 KiB on the
// dedicated connection (BenchmarkHeapPerChannel), so a process that waits
// on a few names at a time opens no connection for them, and one that
// waits on thousands pays for one connection rather than for thousands of
// goroutines.
const SharedChannels = 32

// unsubscribeWait bounds the wait for the answer to a shared channel's
// UNSUBSCRIBE (and so Close) when the server has gone silent; rueidis
// closes such a connection itself, later.
const unsubscribeWait = time.Second

// startReceiveLocked starts c's goroutine.
func (m *Manager) startReceiveLocked(c *channel) {
	c.receiving = true
	m.nShared++
	m.wg.Add(1)
	go m.receive(c)
}

// receive keeps c subscribed while it has listeners, then drops it.
func (m *Manager) receive(c *channel) {
	defer m.wg.Done()
	backoff := minBackoff
	for round := uint64(1); ; round++ {
		m.mu.Lock()
		if m.closed || len(c.listeners) == 0 {
			// The last round unsubscribed, or its connection is gone:
			// nothing of c is left on the server.
			c.receiving = false
			c.cancel = nil
			m.stayLocked(c)
			m.nShared--
			if m.channels[c.name] == c {
				m.dropLocked(c)
			}
			m.mu.Unlock()
			return
		}
		ctx, cancel := context.WithCancel(m.ctx)
		c.round, c.cancel, c.roundHealthy = round, cancel, false
		m.mu.Unlock()

		err := m.receiveRound(ctx, c, round)
		left := ctx.Err() != nil // read before cancel, which sets it
		cancel()
		m.mu.Lock()
		m.stayLocked(c)
		m.mu.Unlock()
		if left {
			continue // the last listener left, or Close: the loop's top decides
		}
		if err == nil {
			err = errUnsubscribed
		}
		m.mu.Lock()
		wanted, healthy := len(c.listeners) > 0 && !m.closed, c.roundHealthy
		m.mu.Unlock()
		if !wanted {
			continue
		}
		if healthy {
			backoff = minBackoff // it worked: a new trouble starts over
		}
		m.cfg.Logger.Warn("holdfast/pubsub: subscription ended; subscribing again after a backoff", "channel", c.name, "err", err, "backoff", backoff)
		t := m.cfg.Clock.Timer(backoff)
		select {
		case <-m.quit:
			t.Stop()
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// receiveRound runs one Receive of c and returns its error.
func (m *Manager) receiveRound(ctx context.Context, c *channel, round uint64) (err error) {
	var conn rueidis.CommandClient // the connection of the round's last subscription
	rc := rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
		m.onRoundSubscription(c, round, s)
	})
	rc = rueidis.WithOnReceiveReturnHook(rc, func(err error, cc rueidis.CommandClient) error {
		// Runs as each connection's part of the round ends, before
		// rueidis tries again on a new one.
		m.mu.Lock()
		if c.round == round {
			if err != nil && ctx.Err() == nil {
				m.lostLocked(c)
			}
			c.confirmed = false
		}
		m.mu.Unlock()
		conn = cc
		return err
	})
	err = m.cfg.Redis.Receive(rc, m.proto.subscribe(m.cfg.Redis.B(), []string{c.name}), func(msg rueidis.PubSubMessage) {
		m.onMessageOf(c, msg)
	})
	if ctx.Err() != nil && conn != nil {
		// Receive does not unsubscribe: the server would go on sending
		// the channel's messages to a connection that drops them. Say so
		// on the connection the round used, now that Receive has
		// returned (rueidis's reader no longer waits on the round to take
		// a message, so it can read the reply), and before a later round
		// or Manager may subscribe the channel again. A broken connection
		// fails at once; it carries no subscription any more anyway.
		// A silent server holds it up for at most unsubscribeWait.
		uctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		t := m.cfg.Clock.AfterFunc(unsubscribeWait, cancel)
		_ = conn.Do(uctx, m.proto.unsubscribe(conn.B(), []string{c.name})).Error()
		t.Stop()
		cancel()
	}
	return err
}

// onRoundSubscription runs on rueidis's reader goroutine for every
// confirmation of c's SUBSCRIBE (the first, and one after each reconnect
// within the round) and UNSUBSCRIBE.
func (m *Manager) onRoundSubscription(c *channel, round uint64, s rueidis.PubSubSubscription) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.round != round || m.channels[c.name] != c {
		return
	}
	switch s.Kind {
	case m.proto.subscribed:
		c.roundHealthy = true
		if c.leaveTimer != nil {
			// The connection is up: ending the round now fails nobody's dial.
			m.stayLocked(c)
			c.cancel()
			return
		}
		c.confirmed = true
		m.tellAllLocked(c)
	case m.proto.unsubscribed:
		c.confirmed = false
	}
}

// onMessageOf runs on the goroutine of c's round for every message.
func (m *Manager) onMessageOf(c *channel, msg rueidis.PubSubMessage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.channels[c.name] != c || !c.confirmed {
		return
	}
	for l := range c.listeners {
		if l.toldLocked {
			m.postLocked(l, Message)
		}
	}
}

// leaveSharedLocked ends c's round once its last listener left: the
// round unsubscribes, and the goroutine drops c unless a listener came back
// by then.
//
// A round that Redis has not confirmed yet may be dialing the connection.
// rueidis dials a connection once for every caller that needs it, under
// the first caller's context, so cancelling the round then would fail the
// client's other commands waiting on that dial ("operation was canceled"),
// though the server is fine. Such a round ends once its SUBSCRIBE is
// confirmed, or after unsubscribeWait on the injected clock if the server
// does not answer by then.
func (m *Manager) leaveSharedLocked(c *channel) {
	if c.cancel == nil || c.leaveTimer != nil {
		return
	}
	if c.confirmed {
		c.confirmed = false
		c.cancel()
		return
	}
	c.leaveTimer = m.cfg.Clock.AfterFunc(unsubscribeWait, c.cancel)
}

// stayLocked drops c's pending end of round: a listener came back, or the
// round ended anyway.
func (m *Manager) stayLocked(c *channel) {
	if c.leaveTimer != nil {
		c.leaveTimer.Stop()
	}
	c.leaveTimer = nil
}
