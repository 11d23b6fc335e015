package lockactor

import "time"

// LeaderState is one state of an election as an observer tells it: Term 0
// (and Value "") when nobody leads. Err is set when the observer could not
// read Redis; Value and Term are then the last state it read (zero if it
// read none).
type LeaderState struct {
	Value string
	Term  uint64
	Err   error
}

// Observer is the pure part of observing one election name (Client.Observe
// in production, sim's observers in the simulator): which reads are news,
// and when to read again. The runtime around it reads elect_read.lua when a
// message comes on the name's channel, when its subscription is (re-)made
// or its connection lost, and when the wait Observer asks for runs out; it
// passes every result in, one read at a time, and sends the states Observer
// says to tell. The zero Observer has told nothing.
//
// A read is news when it differs from the state told last, whatever its
// term. The reads of one Observer do not overlap and each is one atomic
// call on the primary, so they see Redis's states in Redis's order, and
// the terms told rise as Redis's do: a leader older than one told is never
// sent while Redis keeps its data. When Redis loses data (a failover that
// lost the last grant hands its term to a new leader; a restart without
// persistence starts terms again at 1), the leader it holds afterwards is
// told too, though its term is not above the last one told: dropping it,
// as a read that must be stale, would show a leader Redis no longer has
// until the terms passed the old ones again (for an empty restart, maybe
// never). A read can only look stale by crossing such a loss: messages only
// ask for a read (their content is not used, so a late one brings no old
// state); a read given up on has its reply dropped, never taken for a later
// one's; and a node that answers after losing its primacy (a deposed
// master, a split brain) holds writes that Redis discards, a loss of data
// that the observer follows as such, then the side that survives.
//
// A failed read is told once, as the last state read with Err set; the
// next successful read is told even when its state is the one read before,
// so that a reader learns that Redis answers again.
type Observer struct {
	known   bool
	told    LeaderState
	backoff time.Duration
}

// Backoff of a failed read: doubles from the first to the last.
const (
	ObserveMinBackoff = 50 * time.Millisecond
	ObserveMaxBackoff = time.Second
)

// Read takes a successful read: st (its Err is ignored), and the remaining
// lease of its leader (ttl < 0: no expiry). It returns whether to tell st
// to the observers, and when to read again without a message: after next
// when arm, else only on a message (Redis announces no expiry, so a led
// name is read again when its lease runs out).
func (o *Observer) Read(st LeaderState, ttl time.Duration) (tell bool, next time.Duration, arm bool) {
	o.backoff = 0
	st.Err = nil
	if st.Term != 0 && ttl >= 0 {
		next, arm = ttl, true
	}
	if o.known && o.told.Err == nil && o.told.Value == st.Value && o.told.Term == st.Term {
		return false, next, arm
	}
	o.known, o.told = true, st
	return true, next, arm
}

// Failed takes a failed read (err is not nil) and returns whether to tell
// it — the first failure after a success, or before any read — and when to
// try again. The state told then is Told's: the last state read, with Err.
func (o *Observer) Failed(err error) (tell bool, next time.Duration) {
	o.backoff = min(max(2*o.backoff, ObserveMinBackoff), ObserveMaxBackoff)
	if o.known && o.told.Err != nil {
		return false, o.backoff
	}
	o.known, o.told.Err = true, err
	return true, o.backoff
}

// Told returns the latest state told, and whether one was.
func (o *Observer) Told() (LeaderState, bool) { return o.told, o.known }
