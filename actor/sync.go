package actor

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/scripts"
)

// Synced is the Rueidis adapter with replica sync (Config.SyncReplicas):
// every fresh grant and every renewal batch is followed by WAIT for a number
// of replica acknowledgements, sent in the same DoMulti as the script.
// rueidis treats WAIT as a blocking command and runs such a DoMulti on one
// dedicated connection, so the WAIT counts the acks of the script's own
// writes (on a cluster both go to the node of the script's slot).
//
// A grant that too few replicas acknowledged within the timeout is undone
// (owner-checked release) and reported as ErrReplicaSync, which ends the
// request: a failover could otherwise give the name to someone else while
// this process believes it holds it. A renewal with too few acks counts as a
// failed renewal (transient): the hold keeps its old deadline, the watchdog
// retries, and the hold ends Lost at its deadline if no renewal syncs.
//
// Re-entries (a grant with expected > 0) and handoffs are not synced: a
// re-entry only raises a count, which the next synced renewal carries to the
// replicas, and the Client turns local handoff off when it syncs.
type Synced struct {
	*Rueidis
	replicas int64
	timeout  time.Duration
}

// NewSynced wraps r so grants and renewals wait for replicas acks, each WAIT
// bounded by timeout.
func NewSynced(r *Rueidis, replicas int, timeout time.Duration) *Synced {
	return &Synced{Rueidis: r, replicas: int64(replicas), timeout: timeout}
}

// ErrReplicaSync is the cause of a request whose grant too few replicas
// acknowledged within the sync timeout.
var ErrReplicaSync = lockactor.ErrReplicaSync

// errUnsynced marks a renewal whose acks fell short: transient, so the
// watchdog retries until the hold's deadline.
type errUnsynced struct{ err error }

func (e errUnsynced) Error() string { return e.err.Error() }
func (e errUnsynced) Unwrap() error { return e.err }

var (
	shaAcquire = sha1hex(scripts.Acquire)
	shaRenew   = sha1hex(scripts.Renew)
)

func sha1hex(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}

// Acquire implements Redis: a fresh grant is answered only once enough
// replicas acknowledged it.
func (s *Synced) Acquire(ctx context.Context, name, field string, lease time.Duration, expected int64) (lockactor.AcquireResult, error) {
	if expected != 0 {
		return s.Rueidis.Acquire(ctx, name, field, lease, expected)
	}
	keys := []string{scripts.LockKey(name), scripts.FenceKey(name)}
	args := []string{field, millis(lease), "0"}
	reply, acks, err := s.execWait(ctx, scripts.Acquire, shaAcquire, keys, args)
	if err != nil {
		return lockactor.AcquireResult{}, err
	}
	vals, err := reply.AsIntSlice()
	if err != nil {
		return lockactor.AcquireResult{}, err
	}
	res, err := lockactor.DecodeAcquire(vals)
	if err != nil || res.Code != scripts.AcquireGranted || acks >= s.replicas {
		return res, err
	}
	// Too few acks: take the grant back before anyone relies on it. If the
	// undo fails the outcome is unknown, and the caller's retry of this
	// acquire answers the grant again and waits for the acks again.
	if _, uerr := s.Rueidis.Release(ctx, name, field, res.Count); uerr != nil {
		return lockactor.AcquireResult{}, fmt.Errorf("holdfast: undoing a grant with %d of %d replica acks: %w", acks, s.replicas, uerr)
	}
	return lockactor.AcquireResult{}, fmt.Errorf("%w: %d of %d replicas acknowledged the grant within %v",
		ErrReplicaSync, acks, s.replicas, s.timeout)
}

// Renew implements Redis: a batch counts as renewed only once enough
// replicas acknowledged it.
func (s *Synced) Renew(ctx context.Context, keys, args []string) ([]bool, error) {
	reply, acks, err := s.execWait(ctx, scripts.Renew, shaRenew, keys, args)
	if err != nil {
		return nil, err
	}
	if acks < s.replicas {
		return nil, errUnsynced{fmt.Errorf("%w: %d of %d replicas acknowledged the renewal within %v",
			ErrReplicaSync, acks, s.replicas, s.timeout)}
	}
	vals, err := reply.AsIntSlice()
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(vals))
	for i, v := range vals {
		out[i] = v == 1
	}
	return out, nil
}

// Classify implements Redis: a grant refused for want of acks is permanent
// (the request ends with ErrReplicaSync), a renewal short of acks transient.
func (s *Synced) Classify(err error) lockactor.Fault {
	var u errUnsynced
	switch {
	case errors.As(err, &u):
		return lockactor.Transient
	case errors.Is(err, ErrReplicaSync):
		return lockactor.Permanent
	}
	return s.Rueidis.Classify(err)
}

// execWait runs a script (EVALSHA, EVAL when the server lacks it) and WAIT
// in one DoMulti, and returns the script's reply and the number of replicas
// that acknowledged.
func (s *Synced) execWait(ctx context.Context, src, sha string, keys, args []string) (rueidis.RedisMessage, int64, error) {
	c := s.client
	wait := func() rueidis.Completed {
		return c.B().Wait().Numreplicas(s.replicas).Timeout(max(1, s.timeout.Milliseconds())).Build()
	}
	res := c.DoMulti(ctx,
		c.B().Evalsha().Sha1(sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build(),
		wait())
	if rerr, ok := rueidis.IsRedisErr(res[0].Error()); ok && rerr.IsNoScript() {
		res = c.DoMulti(ctx,
			c.B().Eval().Script(src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build(),
			wait())
	}
	reply, err := res[0].ToMessage()
	if err != nil {
		return reply, 0, err
	}
	acks, err := res[1].AsInt64()
	if err != nil {
		// The script ran: its outcome is unknown to the caller, so the
		// error must not look like a refusal (%v, not %w: Ambiguous).
		return reply, 0, fmt.Errorf("holdfast: WAIT after a script call: %v", err)
	}
	return reply, acks, nil
}
