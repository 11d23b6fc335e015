package actor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/scripts"
)

// Synced is the Rueidis adapter with replica sync (Config.SyncReplicas):
// every script call but a release, and every renewal batch, is followed by WAIT for a
// number of replica acknowledgements, sent in the same DoMulti as the
// script. rueidis treats WAIT as a blocking command and runs such a DoMulti
// on one dedicated connection, so the WAIT counts the acks of the script's
// own writes. On a cluster the pair goes to the node that runs the script,
// and a slot move's MOVED or ASK sends it again, whole, to the slot's new
// master (see execWait).
//
// A call with too few acks within the timeout still returns its reply,
// with an error wrapping ErrReplicaSync that Classify calls
// lockactor.Unsynced: the kernel undoes a grant so answered and ends its
// request with that error, and takes any other reply as it is. A renewal
// batch with too few acks fails with that error (through Call or Renew
// alike): the kernel counts it a failed renewal, the hold keeps its old
// deadline, the watchdog retries, and the hold is Lost at its deadline if
// no renewal syncs.
type Synced struct {
	*Rueidis
	replicas int64
	timeout  time.Duration
}

// NewSynced wraps r so every call waits for replicas acks, each WAIT
// bounded by timeout.
func NewSynced(r *Rueidis, replicas int, timeout time.Duration) *Synced {
	return &Synced{Rueidis: r, replicas: int64(replicas), timeout: timeout}
}

// ErrReplicaSync is wrapped by the errors of calls too few replicas
// acknowledged within the sync timeout.
var ErrReplicaSync = lockactor.ErrReplicaSync

// errUnsynced marks a script call that ran but was not acknowledged by
// enough replicas (Unsynced).
type errUnsynced struct{ error }

func (e errUnsynced) Unwrap() error { return e.error }

// Call implements Redis: the script and WAIT on one connection. A script
// that only gives a hold up (Script.NoSync) runs without WAIT.
func (s *Synced) Call(ctx context.Context, c scripts.Call) ([]int64, error) {
	if s.lua[c.Script] == nil {
		return nil, fmt.Errorf("holdfast: script %q not registered with scripts.NewScript", c.Script.Name)
	}
	if c.Script.NoSync {
		return s.Rueidis.Call(ctx, c)
	}
	reply, acks, err := s.execWait(ctx, c)
	if err != nil {
		return nil, err
	}
	vals, err := ints(reply)
	if err != nil {
		return nil, err
	}
	if acks < s.replicas {
		return vals, errUnsynced{s.shortErr(acks, c.Script.Name)}
	}
	return vals, nil
}

// Renew runs a batch script of the renewal shape; a batch counts as
// renewed only once enough replicas acknowledged it.
func (s *Synced) Renew(ctx context.Context, script *scripts.Script, keys, args []string) ([]bool, error) {
	reply, acks, err := s.execWait(ctx, scripts.Call{Script: script, Keys: keys, Args: args})
	if err != nil {
		return nil, err
	}
	if acks < s.replicas {
		return nil, errUnsynced{s.shortErr(acks, script.Name)}
	}
	vals, err := ints(reply)
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(vals))
	for i, v := range vals {
		out[i] = v == 1
	}
	return out, nil
}

func (s *Synced) shortErr(acks int64, script string) error {
	return fmt.Errorf("%w: %d of %d replicas acknowledged the %s call within %v",
		ErrReplicaSync, acks, s.replicas, script, s.timeout)
}

// Classify implements Redis.
func (s *Synced) Classify(err error) lockactor.Fault {
	var u errUnsynced
	if errors.As(err, &u) {
		return lockactor.Unsynced
	}
	return s.Rueidis.Classify(err)
}

// execWait runs a script (EVALSHA, EVAL when the server lacks it) and WAIT
// on one connection, and returns the script's reply and the number of
// replicas that acknowledged it.
//
// On a cluster the pair must not go through the cluster client's DoMulti:
// on MOVED or ASK it sends the redirected script alone to the new node and
// leaves the WAIT's count from the old one, whose acks say nothing about
// the script. (rueidis v1.0.79 even panics when ASK redirects a DoMulti
// with a blocking command in it.) So the pair goes on a dedicated
// connection to the slot's master as the client sees it, which follows no
// redirect: a MOVED or ASK reply means the script did not run there, and
// the pair is sent again, whole, to the node the reply names (after ASKING
// for ASK), up to maxSyncRedirects times. A redirect to a node the client
// does not know yet, or one too many, is returned as it is: an error reply
// from Redis, so the call counts as refused (Transient) and is tried again
// later, by when the client has refreshed its slot map.
func (s *Synced) execWait(ctx context.Context, c scripts.Call) (rueidis.RedisMessage, int64, error) {
	rc := s.client
	if rc.Mode() != rueidis.ClientModeCluster {
		return s.pair(ctx, rc, c, false)
	}
	dc, release := rc.Dedicate()
	reply, acks, err := s.pair(ctx, dc, c, false)
	release()
	for range maxSyncRedirects {
		addr, ask, ok := redirect(err)
		if !ok {
			break
		}
		node := rc.Nodes()[addr]
		if node == nil {
			break
		}
		reply, acks, err = s.pair(ctx, node, c, ask)
	}
	return reply, acks, err
}

// maxSyncRedirects bounds the redirects a synced call follows: a move is
// one MOVED, or ASK then MOVED when it ends while the call is redirected.
const maxSyncRedirects = 3

// redirect tells whether err is a MOVED or ASK reply, and where it points.
func redirect(err error) (addr string, ask, ok bool) {
	rerr, isRedis := rueidis.IsRedisErr(err)
	if !isRedis {
		return "", false, false
	}
	if addr, ok = rerr.IsMoved(); ok {
		return addr, false, true
	}
	addr, ok = rerr.IsAsk()
	return addr, true, ok
}

// waitCmd is the WAIT that follows a synced call.
func (s *Synced) waitCmd() rueidis.Completed {
	return s.client.B().Wait().Numreplicas(s.replicas).Timeout(max(1, s.timeout.Milliseconds())).Build()
}

// multiDoer is a rueidis client, dedicated client or node client: where a
// pair is sent.
type multiDoer interface {
	DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult
}

// pair sends the script (preceded by ASKING when ask) and WAIT in one
// DoMulti on to, again with EVAL if the server lacks the script. A WAIT is
// blocking to rueidis, so a node's DoMulti with one runs on a connection of
// its own and the WAIT counts the acks of the script's writes.
func (s *Synced) pair(ctx context.Context, to multiDoer, c scripts.Call, ask bool) (rueidis.RedisMessage, int64, error) {
	rc := s.client
	cmds := func(script rueidis.Completed) []rueidis.Completed {
		wait := s.waitCmd()
		if ask {
			return []rueidis.Completed{rc.B().Asking().Build(), script, wait}
		}
		return []rueidis.Completed{script, wait}
	}
	first := 0
	if ask {
		first = 1
	}
	res := to.DoMulti(ctx, cmds(s.evalsha(c))...)
	if rerr, ok := rueidis.IsRedisErr(res[first].Error()); ok && rerr.IsNoScript() {
		src := s.source(c.Script)
		res = to.DoMulti(ctx, cmds(rc.B().Eval().Script(src).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(c.Args...).Build())...)
	}
	reply, err := res[first].ToMessage()
	if err != nil {
		return reply, 0, err
	}
	acks, err := res[first+1].AsInt64()
	if err != nil {
		// The script ran: its outcome is unknown to the caller, so the
		// error must not look like a refusal (%v, not %w: Ambiguous).
		return reply, 0, fmt.Errorf("holdfast: WAIT after a script call: %v", err)
	}
	return reply, acks, nil
}
