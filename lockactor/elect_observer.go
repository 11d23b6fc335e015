package lockactor

import "time"

// LeaderState is one state of an election as an observer tells it: Term 0
// (and Value "") when nobody leads.
type LeaderState struct {
	Value string
	Term  uint64
}

// Observer is the pure part of observing one election name (Client.Observe
// in production, sim's observers in the simulator): which reads are news,
// and when to read again. The runtime around it reads elect_read.lua when a
// message comes on the name's channel, when its subscription is (re-)made,
// and when the wait Observer asks for runs out; it passes every result in
// and sends the states Observer says to tell. The zero Observer has told
// nothing.
//
// What it promises the observers: the first successful read is told; after
// it only news is, a leader of a higher term than any told, or a vacancy
// after a leader; so the terms told never go backwards, even when a read
// crosses a roll-back of the data (failover with loss).
type Observer struct {
	known   bool
	told    LeaderState
	maxTerm uint64
	backoff time.Duration
}

// Backoff of a failed read: doubles from the first to the last.
const (
	ObserveMinBackoff = 50 * time.Millisecond
	ObserveMaxBackoff = time.Second
)

// Read takes a successful read: st, and the remaining lease of its leader
// (ttl < 0: no expiry). It returns whether to tell st to the observers, and
// when to read again without a message: after next when arm, else only on
// a message (Redis announces no expiry, so a led name is read again when
// its lease runs out).
func (o *Observer) Read(st LeaderState, ttl time.Duration) (tell bool, next time.Duration, arm bool) {
	o.backoff = 0
	if st.Term != 0 && ttl >= 0 {
		next, arm = ttl, true
	}
	if o.known && (st.Term != 0 && st.Term <= o.maxTerm || st.Term == 0 && o.told.Term == 0) {
		return false, next, arm
	}
	o.known, o.told = true, st
	o.maxTerm = max(o.maxTerm, st.Term)
	return true, next, arm
}

// Failed takes a failed read and returns when to try again. The state told
// stays as it was.
func (o *Observer) Failed() (next time.Duration) {
	o.backoff = min(max(2*o.backoff, ObserveMinBackoff), ObserveMaxBackoff)
	return o.backoff
}

// Told returns the latest state told, and whether one was.
func (o *Observer) Told() (LeaderState, bool) { return o.told, o.known }
