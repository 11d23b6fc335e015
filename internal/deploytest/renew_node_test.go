package deploytest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/actor"
	"github.com/holdfast/holdfast/internal/topology"
	"github.com/holdfast/holdfast/scripts"
)

// TestClusterRenewalsPerNode holds 10,000 locks with a 6s watchdog lease
// (renewed every 2s) on a 3-master cluster and checks, over a window
// of about 17s:
//
//   - the renewals go out batched per node: at least 50 holds per script
//     call, counted by the masters (INFO commandstats);
//   - a slot of 40 held names moves to another master during the
//     renewals — half its keys first, so that renewals meet the slot with
//     keys on both masters, then the rest, then SETSLOT NODE — and every
//     one of its holds stays held, its key renewed on the new master;
//   - holds whose keys are deleted (5 of the moved slot, on the new master,
//     and 5 elsewhere) end with ErrNotOwner, and their keys stay gone: no
//     renewal brings back a hold Redis no longer shows;
//   - every other hold stays held, its key still there.
//
// A renewal counted on a node that did not run it would leave its key to
// expire while the Lock stays held: the window after the move outlasts the
// lease, and each held Lock's key is checked.
func TestClusterRenewalsPerNode(t *testing.T) {
	const (
		held  = 10_000
		moved = 40
		// A renewal round every lease/3, and each phase of the move below
		// lasts more than one round. A hold is lost only when renewals
		// miss for 2/3 of a lease, which a loaded CI machine running the
		// race detector beside other packages must not reach.
		lease = 6 * time.Second
	)
	c := topology.StartCluster(t, 3)
	hf := newClient(t, c.Client(t), holdfast.Config{WatchdogTimeout: lease})
	ctx := context.Background()

	names := make([]string, held)
	for i := range names {
		names[i] = fmt.Sprintf("renew:%d", i)
		if i < moved {
			names[i] = fmt.Sprintf("mv}%d", i) // one slot: the tag ends at the first '}'
		}
	}
	locks := make([]*holdfast.Lock, held)
	for i, name := range names {
		locks[i] = hf.Lock(ctx, name)
	}
	start := time.Now()
	for _, l := range locks {
		mustAcquire(t, l)
	}
	t.Logf("%d holds acquired in %v", held, time.Since(start).Round(time.Millisecond))

	slot := actor.Slot(scripts.LockKey(names[0]))
	from := c.Owner(slot)
	to := c.Masters[0]
	if to == from {
		to = c.Masters[1]
	}
	for _, n := range c.Masters {
		n.MustDo("CONFIG", "RESETSTAT")
	}
	start = time.Now()

	phase := lease / 2 // one and a half renewal rounds
	time.Sleep(phase)
	m := c.BeginMove(slot, to)
	half := []string{"MIGRATE", "127.0.0.1", to.Port, "", "0", "5000", "KEYS"}
	for _, name := range names[:moved/2] {
		half = append(half, scripts.LockKey(name))
	}
	from.MustDo(half...)
	time.Sleep(phase) // renewals meet the slot on both masters
	m.MigrateKeys()
	time.Sleep(lease / 3 * 2) // and with every key on the new master (ASK)
	m.Finish()
	if n, _ := from.MustDo("CLUSTER", "COUNTKEYSINSLOT", fmt.Sprint(slot)).AsInt64(); n != 0 {
		t.Fatalf("%d keys of the slot left on the old master", n)
	}

	gone := map[int]bool{}
	for i := range 5 {
		gone[i] = true           // of the moved slot, now on the new master
		gone[moved+100*i] = true // elsewhere
	}
	for i := range gone {
		key := scripts.LockKey(names[i])
		if n, _ := c.Owner(actor.Slot(key)).MustDo("DEL", key).AsInt64(); n != 1 {
			t.Fatalf("DEL %s deleted %d keys", key, n)
		}
	}
	time.Sleep(lease + time.Second) // past every lease renewed before the move ended
	window := time.Since(start)

	var calls int64
	for _, n := range c.Masters {
		calls += scriptCalls(t, n.Do)
	}
	renewals := float64(held) * window.Seconds() / (lease / 3).Seconds()
	perCall := renewals / float64(calls)
	t.Logf("%d script calls in %v for about %.0f renewals: %.1f holds per call", calls, window.Round(time.Millisecond), renewals, perCall)
	if perCall < 50 {
		t.Errorf("%.1f holds per script call, want at least 50", perCall)
	}

	present := map[string]bool{}
	for _, k := range c.LockKeys() {
		present[k] = true
	}
	for i, l := range locks {
		key := scripts.LockKey(names[i])
		if gone[i] {
			mustLose(t, l, holdfast.ErrNotOwner)
			if present[key] {
				t.Errorf("%s: its key, deleted, is back", names[i])
			}
			continue
		}
		select {
		case <-l.Lost:
			t.Errorf("%s lost: %v (its key is there: %v)", names[i], l.Err(), present[key])
			continue
		default:
		}
		if !present[key] {
			t.Errorf("%s held, but its key is gone", names[i])
		}
	}
	for _, name := range names[5:moved] {
		ttl, _ := to.MustDo("PTTL", scripts.LockKey(name)).AsInt64()
		if ttl <= 0 || time.Duration(ttl)*time.Millisecond > lease {
			t.Errorf("%s on the new master: PTTL %dms, want in (0, %v]", name, ttl, lease)
		}
	}
	if t.Failed() {
		return
	}
	for i, l := range locks {
		if !gone[i] {
			if err := l.Release(ctx); err != nil && !errors.Is(err, holdfast.ErrReleased) {
				t.Fatalf("release %s: %v", names[i], err)
			}
		}
	}
	if keys := c.LockKeys(); len(keys) > 0 {
		t.Fatalf("%d lock keys left after the releases, e.g. %s", len(keys), strings.Join(keys[:min(3, len(keys))], " "))
	}
}

// TestClusterSyncRenewalsPerNode: with replica sync, a round's renewals go
// to each master as one pipeline of calls and one WAIT on that master's
// connection. Each master runs one script call for its keys; a call that
// also carries another master's key renews that key too, through the
// script-and-WAIT pair of its own slot; a master whose only replica is
// frozen fails its renewals with ErrReplicaSync, and the others' still
// count.
func TestClusterSyncRenewalsPerNode(t *testing.T) {
	c := topology.StartClusterWithReplicas(t, 3, 1)
	ctx := context.Background()
	s := actor.NewSynced(actor.NewRueidis(c.Client(t)), 1, time.Second)
	s.PrepareRenewals(ctx)
	group := s.Group()

	byGroup := map[uint16][]string{}
	var order []uint16
	for i := 0; i < 60; i++ {
		key := scripts.LockKey(fmt.Sprintf("sync-renew:%d", i))
		// A lease shorter than every renewal's below, so each renewal
		// writes (PEXPIRE GT) and is replicated: a renewal that changes
		// nothing propagates nothing, and its WAIT would count the acks of
		// older writes, frozen replica or not.
		c.Owner(actor.Slot(key)).MustDo("SET", key, scripts.Hold{Field: "f", Count: 1, Token: 1}.String(), "PX", "60000")
		g := group(key)
		if _, ok := byGroup[g]; !ok {
			order = append(order, g)
		}
		byGroup[g] = append(byGroup[g], key)
	}
	if len(order) != len(c.Masters) {
		t.Fatalf("%d renewal groups for %d masters", len(order), len(c.Masters))
	}
	calls := func(extra, lease string) []scripts.Call {
		var out []scripts.Call
		for _, g := range order {
			call := scripts.Call{Script: scripts.RenewScript}
			keys := byGroup[g]
			if extra != "" && len(out) == 0 {
				keys = append(append([]string(nil), keys...), extra)
			}
			for _, k := range keys {
				call.Keys = append(call.Keys, k)
				call.Args = append(call.Args, "f", lease)
			}
			out = append(out, call)
		}
		return out
	}
	renew := func(cs []scripts.Call) ([][]bool, []error) {
		out, errs := s.RenewMulti(ctx, cs)
		if len(out) != len(cs) || len(errs) != len(cs) {
			t.Fatalf("%d outcomes and %d errors for %d calls", len(out), len(errs), len(cs))
		}
		return out, errs
	}
	allRenewed := func(what string, out []bool, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for k, ok := range out {
			if !ok {
				t.Fatalf("%s: key %d not renewed", what, k)
			}
		}
	}

	renew(calls("", "600000")) // loads the script on every master
	for _, n := range c.Masters {
		n.MustDo("CONFIG", "RESETSTAT")
	}
	out, errs := renew(calls("", "600001"))
	for j := range out {
		allRenewed(fmt.Sprintf("call %d", j), out[j], errs[j])
	}
	for _, g := range order {
		key := byGroup[g][0]
		if ttl, _ := c.Owner(actor.Slot(key)).MustDo("PTTL", key).AsInt64(); ttl <= 60_000 {
			t.Fatalf("%s: PTTL %dms after its renewal: the renewal did not write", key, ttl)
		}
	}
	for _, n := range c.Masters {
		if got := scriptCalls(t, n.Do); got != 1 {
			t.Errorf("master %s ran %d script calls for its keys, want 1", n.Addr, got)
		}
	}

	// A key of the last group rides in the first group's call: its master
	// does not serve it, and it goes again by its slot.
	last := byGroup[order[len(order)-1]]
	stray := last[len(last)-1]
	c.Owner(actor.Slot(stray)).MustDo("PEXPIRE", stray, "1000")
	out, errs = renew(calls(stray, "600002"))
	for j := range out {
		allRenewed(fmt.Sprintf("call %d with a stray key", j), out[j], errs[j])
	}
	if ttl, _ := c.Owner(actor.Slot(stray)).MustDo("PTTL", stray).AsInt64(); ttl < 10_000 {
		t.Fatalf("the stray key's PTTL is %dms: not renewed on its own master", ttl)
	}

	first := c.Owner(actor.Slot(byGroup[order[0]][0]))
	frozen := c.ReplicasOf(first)[0]
	frozen.Stop()
	t.Cleanup(frozen.Continue)
	// A lease longer than the last renewal's: the call writes on the
	// master, which the frozen replica cannot acknowledge.
	out, errs = renew(calls("", "700000"))
	if !errors.Is(errs[0], holdfast.ErrReplicaSync) {
		t.Errorf("renewal on the master of the frozen replica: %v, %v; want ErrReplicaSync", out[0], errs[0])
	}
	for j := 1; j < len(out); j++ {
		allRenewed(fmt.Sprintf("call %d beside a frozen replica", j), out[j], errs[j])
	}
}
