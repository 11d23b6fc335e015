package holdfast

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/scripts"
)

// KindElection is Info.Kind of a name in use as an election (Elect).
const KindElection = "election"

// MaxValueLen is the longest value Elect accepts, in bytes: a value is
// meant for an address or a host name, and travels with every change of
// leader.
const MaxValueLen = 4096

// Elect campaigns for the leadership of name, announcing value (an address,
// a host name) to observers. It returns at once with the same *Lock as Lock:
// Acquired closes when this caller leads, Lost when its leadership ends
// (Release resigns; the lease was lost; ctx ended), and Token() is its term:
// strictly greater than every earlier leader's, so a resource that rejects
// lower terms than it has seen ignores a deposed leader. Options as for
// Lock: WithWait bounds the campaign (WithWait(0) on a led name ends with
// ErrWaitTimeout), WithLease fixes the term's lease (without it the
// watchdog renews Config.WatchdogTimeout while the leader lives).
//
// Candidates keep nothing in Redis and do not poll: a grant and a
// resignation are announced on the name's channel (one subscription per
// name per Client), so a waiting candidate tries again when the leader
// resigns, and at the end of the leader's lease when it crashed (Redis
// announces no expiry). Two campaigns of one owner (WithOwner) nest, as
// Lock's do: the inner one shares the term and the first value.
//
// An election name is its own kind: a name in use as a lock, fair lock,
// read-write lock or semaphore ends Elect with ErrWrongKind, and those
// kinds refuse an election's name. Under LayoutRedisson Elect ends with
// ErrNotSupported. A bad name ends it with ErrInvalidName, an empty value or
// one over MaxValueLen bytes with ErrInvalidValue.
func (c *Client) Elect(ctx context.Context, name, value string, opts ...Option) *Lock {
	if c.usable() && scripts.ValidateName(name) == nil {
		// The name's errors come first, from request, as for every kind.
		if err := scripts.ValidateValue(value); err != nil {
			return endedLock(name, err)
		}
	}
	return c.requestValue(ctx, name, lockactor.Election, 0, value, opts)
}

// Leader is one state of an election: Term 0 (and Value "") when nobody
// leads.
//
// Err is set only on states Observe sends: the observer could not read
// Redis (Err wraps the read's error), or the channel is about to close for
// a reason other than the end of Observe's ctx (Err says which). Value and
// Term are then the last state the observer read, zero if it read none.
// Client.Leader returns its error beside the Leader, never in it. Leaders
// compare with ==: every Err Observe sends is a pointer.
type Leader struct {
	Value string // what the leader announced
	Term  uint64 // the leader's fencing token
	Err   error  // on Observe's states: Redis could not be read, or the observation ends
}

// Leader reads name's leader now: the zero Leader when nobody leads. A name
// in use as another kind of lock gives ErrWrongKind; a bad name
// ErrInvalidName; a Client of the Redisson layout ErrNotSupported; a failed
// Redis call its error.
func (c *Client) Leader(ctx context.Context, name string) (Leader, error) {
	rdb, err := c.electionReader(ctx, name)
	if err != nil {
		return Leader{}, err
	}
	st, err := readElection(ctx, rdb, name)
	if err != nil {
		return Leader{}, fmt.Errorf("holdfast: reading the leader of %q: %w", name, err)
	}
	return st.Leader, nil
}

// electionReader checks the arguments of Leader and returns the Redis
// client to read with.
func (c *Client) electionReader(ctx context.Context, name string) (rueidis.Client, error) {
	rdb, err := c.inspectable(ctx)
	if err != nil {
		return nil, err
	}
	if err := scripts.ValidateName(name); err != nil {
		return nil, err
	}
	if c.cfg.Layout == LayoutRedisson {
		return nil, fmt.Errorf("%w: elections under the Redisson layout (Redisson has no such object)", ErrNotSupported)
	}
	return rdb, nil
}

// electionState is one read of an election (elect_read.lua).
type electionState struct {
	Leader
	Owner string        // the leader's owner field
	Count int64         // its reentry count
	TTL   time.Duration // the remaining lease; -1 without expiry
}

var electReadScript = rueidis.NewLuaScript(scripts.ElectRead)

// readElection reads name's election in one atomic call. A name in use as
// another kind gives ErrWrongKind.
func readElection(ctx context.Context, rdb rueidis.Client, name string) (electionState, error) {
	reply, err := electReadScript.Exec(ctx, rdb, scripts.ElectReadKeys(name), nil).ToArray()
	if err != nil {
		return electionState{}, err
	}
	first, err := replyInt(reply, 0)
	switch {
	case err != nil:
		return electionState{}, err
	case first == 0:
		return electionState{}, nil
	case first == -2:
		return electionState{}, ErrWrongKind
	case first < 0 || len(reply) != 5:
		return electionState{}, fmt.Errorf("elect_read script: reply of %d elements starting %d", len(reply), first)
	}
	var st electionState
	st.Term = uint64(first)
	pttl, err1 := reply[1].AsInt64()
	value, err2 := reply[2].ToString()
	owner, err3 := reply[3].ToString()
	count, err4 := reply[4].AsInt64()
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			return electionState{}, fmt.Errorf("elect_read script: %w", err)
		}
	}
	st.Value, st.Owner, st.Count, st.TTL = value, owner, count, ttlOf(pttl)
	return st, nil
}

// inspectElection reads an election for Inspect: the leader as its one
// holder, and the lease left.
func inspectElection(ctx context.Context, rdb rueidis.Client, name string, info *Info) (bool, error) {
	st, err := readElection(ctx, rdb, name)
	switch {
	case errors.Is(err, ErrWrongKind):
		return false, nil
	case err != nil:
		return false, err
	case st.Term == 0:
		return false, nil
	}
	info.Holders = []Holder{{Owner: st.Owner, Count: st.Count}}
	info.TTL = st.TTL
	return true, nil
}

var (
	electForceUnlockScript  = rueidis.NewLuaScript(scripts.ElectForceUnlock)
	electForceUnlockSharded = rueidis.NewLuaScript(scripts.Sharded(scripts.ElectForceUnlock))
)

// forceUnlockElection deposes the leader, raises the fence and announces
// the vacancy.
func forceUnlockElection(ctx context.Context, _ *Client, rdb rueidis.Client, name string) (bool, error) {
	script := electForceUnlockScript
	if rdb.Mode() == rueidis.ClientModeCluster {
		script = electForceUnlockSharded
	}
	keys, args := scripts.ElectForceUnlockCall(name)
	n, err := script.Exec(ctx, rdb, keys, args).AsInt64()
	return n == 1, err
}
