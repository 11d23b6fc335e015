package holdfast

import (
	"cmp"
	"slices"
	"time"

	"github.com/holdfast/holdfast/lockactor"
)

// The pure decisions of LockAll and RedLock, kept apart from the coordinator
// so that each has its own table test.

// globalOrder returns the indexes of targets in the one order every LockAll
// takes its parts in: by name, then by ClientID. Every process sorts the same
// names the same way, so two LockAll calls over overlapping names wait for
// each other in one direction only and cannot deadlock. (The ClientID only
// breaks ties between equal names on different Clients.)
func globalOrder(targets []Target) []int {
	idx := make([]int, len(targets))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		ta, tb := targets[a], targets[b]
		return cmp.Or(cmp.Compare(ta.Name, tb.Name), cmp.Compare(ta.Client.cfg.ClientID, tb.Client.cfg.ClientID))
	})
	return idx
}

// quorum is the number of nodes a RedLock on n nodes needs: a strict
// majority, so that any two quorums share a node.
func quorum(n int) int { return n/2 + 1 }

// redlockValidity is Redlock's validity bound: the lease counted from before
// the first request was sent, less the drift allowance (lease/100 + 2ms).
// Every part's own deadline counts from its own send, which is never earlier,
// so quorumDeadline over the parts' deadlines is never earlier than this.
func redlockValidity(firstSend time.Time, lease time.Duration) time.Time {
	return lockactor.Validity(firstSend, lease)
}

// quorumDeadline is how long a majority holds: the q-th latest of the held
// parts' deadlines (zero when fewer than q parts hold). Until then at least q
// nodes still keep the hold.
func quorumDeadline(deadlines []time.Time, q int) time.Time {
	if q <= 0 || len(deadlines) < q {
		return time.Time{}
	}
	d := slices.Clone(deadlines)
	slices.SortFunc(d, func(a, b time.Time) int { return b.Compare(a) })
	return d[q-1]
}

// earliest is LockAll's deadline: the hold of all parts is valid until the
// first of them runs out (zero for no deadlines).
func earliest(deadlines []time.Time) time.Time {
	var min time.Time
	for _, d := range deadlines {
		if min.IsZero() || d.Before(min) {
			min = d
		}
	}
	return min
}

// fenceFloor is the token of a RedLock hold: the highest token its majority
// returned. Raising every granted node's counter to it makes any later grant
// on those nodes return more.
func fenceFloor(tokens []uint64) uint64 {
	var t uint64
	for _, x := range tokens {
		t = max(t, x)
	}
	return t
}

// firstRefused returns the first slot (in global order) of a LockAll round
// that was not granted, or -1 when every slot was.
func firstRefused(granted []bool) int {
	return slices.Index(granted, false)
}
