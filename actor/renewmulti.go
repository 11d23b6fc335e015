package actor

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/scripts"
)

// RenewMulti runs several batch calls of the renewal shape at once and
// returns one outcome per call (see renewal.ExecMulti). On a cluster each
// call goes to the master its first key's slot maps to, as one call of the
// script's cross-slot variant on that node's own connection, and the calls
// of one node share a pipeline (see renewByNode); elsewhere the calls go
// in one DoMulti.
func (r *Rueidis) RenewMulti(ctx context.Context, calls []scripts.Call) ([][]bool, []error) {
	return r.renewByNode(ctx, calls, nil)
}

// RenewMulti is Rueidis.RenewMulti with replica sync: each node's pipeline
// of calls ends with one WAIT, on the same connection, and its calls count
// as renewed only once enough replicas acknowledged them.
func (s *Synced) RenewMulti(ctx context.Context, calls []scripts.Call) ([][]bool, []error) {
	return s.renewByNode(ctx, calls, s)
}

// evalMulti runs calls in one DoMulti by EVALSHA, then those whose script
// the server lacks in a second DoMulti by EVAL (which loads it), and
// returns each call's result, in order. Every call's script must be
// registered (scripts.NewScript).
func (r *Rueidis) evalMulti(ctx context.Context, calls []scripts.Call) []rueidis.RedisResult {
	cmds := make(rueidis.Commands, len(calls))
	for i, c := range calls {
		cmds[i] = r.evalsha(c)
	}
	res := r.client.DoMulti(ctx, cmds...)
	var again rueidis.Commands
	var againIdx []int
	for i, rr := range res {
		if rerr, ok := rueidis.IsRedisErr(rr.Error()); ok && rerr.IsNoScript() {
			c := calls[i]
			again = append(again, r.client.B().Eval().Script(r.source(c.Script)).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(c.Args...).Build())
			againIdx = append(againIdx, i)
		}
	}
	if len(again) > 0 {
		for j, rr := range r.client.DoMulti(ctx, again...) {
			res[againIdx[j]] = rr
		}
	}
	return res
}

// evalsha builds the EVALSHA of c.
func (r *Rueidis) evalsha(c scripts.Call) rueidis.Completed {
	return r.client.B().Evalsha().Sha1(r.sha1(c.Script)).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(c.Args...).Build()
}

func bools(res rueidis.RedisResult) ([]bool, error) {
	vals, err := res.AsIntSlice()
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(vals))
	for k, v := range vals {
		out[k] = v == 1
	}
	return out, nil
}

// sha1 is the SHA1 of the source r runs for script: what EVALSHA names.
func (r *Rueidis) sha1(script *scripts.Script) string {
	if v, ok := r.shas.Load(script); ok {
		return v.(string)
	}
	h := sha1hex(r.source(script))
	r.shas.Store(script, h)
	return h
}

func sha1hex(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}

// crossScript is the cross-slot variant of a renewal script
// (scripts.CrossSlot) and its SHA1.
type crossScript struct{ src, sha string }

// cross returns the cross-slot variant of script as r runs it.
func (r *Rueidis) cross(script *scripts.Script) *crossScript {
	if v, ok := r.crosses.Load(script); ok {
		return v.(*crossScript)
	}
	src := scripts.CrossSlot(r.source(script))
	cs := &crossScript{src: src, sha: sha1hex(src)}
	r.crosses.Store(script, cs)
	return cs
}

// PrepareRenewals reads a cluster's slot map, within ctx, when there is
// none or it is stale, so that Group places the next rounds' renewals on
// their nodes (renewal.Config.Prepare, which runs it beside the rounds).
// It returns at once when the map is fresh or another read is out; the
// read goes to the node most likely to answer: the one that answered last
// (a renewal pipeline or a read), else a master of the last map.
func (r *Rueidis) PrepareRenewals(ctx context.Context) {
	if r.client.Mode() == rueidis.ClientModeCluster && !r.routes.off.Load() {
		r.routes.refresh(ctx, r.client)
	}
}

// renewByNode runs calls of the renewal shape on a cluster, one call per
// call given, each on the node that serves its first key's slot in the
// slot map (nodeRoutes), the calls of one node in one pipeline on that
// node's own client, which follows no redirect. With sync, the pipeline
// ends with WAIT, so the acks counted are those of the node that ran the
// calls. A renewal is counted only from the reply of the node that ran
// it; every other key goes again, by slot, through the path that follows
// MOVED and ASK (bySlot):
//
//   - a key the node does not serve (the script's scripts.NotServed: the
//     slot moved, or is moving and the key is already on its new master);
//   - every key of a call the node refused with an error reply (its slot
//     half migrated, the cluster down, a server without cross-slot
//     scripts), and of a call whose node the client does not know.
//
// Any of these marks the slot map stale, to be read again beside the next
// rounds (PrepareRenewals): the calls go with the map as it is and never
// wait for a read. A call that failed without a reply (a timeout, a broken
// connection) may have run: its keys get that error and are not sent
// again.
func (r *Rueidis) renewByNode(ctx context.Context, calls []scripts.Call, synced *Synced) ([][]bool, []error) {
	out := make([][]bool, len(calls))
	errs := make([]error, len(calls))
	for i, c := range calls {
		if r.lua[c.Script] == nil {
			errs[i] = errors.New("holdfast: renew script not registered with scripts.NewScript")
			continue
		}
		out[i] = make([]bool, len(c.Keys))
	}
	if r.client.Mode() != rueidis.ClientModeCluster {
		r.whole(ctx, calls, out, errs, synced)
		return out, errs
	}
	var routes *slotRoutes
	if !r.routes.off.Load() {
		routes = r.routes.routes()
	}
	if routes == nil {
		r.bySlot(ctx, calls, allKeys(calls, errs), out, errs, synced)
		return out, errs
	}
	nodes := r.client.Nodes()
	byNode := make(map[string]*nodeCalls)
	var retry []keyRef
	for i, c := range calls {
		if errs[i] != nil || len(c.Keys) == 0 {
			continue
		}
		addr := routes.addr[Slot(c.Keys[0])]
		nc := nodes[addr]
		if nc == nil {
			retry = appendCall(retry, i, len(c.Keys))
			continue
		}
		n := byNode[addr]
		if n == nil {
			n = &nodeCalls{addr: addr, client: nc}
			byNode[addr] = n
		}
		n.idx = append(n.idx, i)
	}
	var wg sync.WaitGroup
	for _, n := range byNode {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.runNode(ctx, n, calls, synced)
		}()
	}
	wg.Wait()
	for _, n := range byNode {
		for j, i := range n.idx {
			res := n.res[j]
			switch {
			case res.refused:
				retry = appendCall(retry, i, len(calls[i].Keys))
			case res.err != nil:
				errs[i] = res.err
			default:
				for k, v := range res.vals {
					if v == scripts.NotServed {
						retry = append(retry, keyRef{i, k})
						continue
					}
					out[i][k] = v == 1
				}
			}
		}
	}
	if len(retry) > 0 {
		r.routes.stale.Store(true)
		r.bySlot(ctx, calls, retry, out, errs, synced)
	}
	return out, errs
}

// nodeCalls are the calls of one round that go to one node, and their
// outcomes there.
type nodeCalls struct {
	addr   string
	client rueidis.Client
	idx    []int // of the calls given to renewByNode
	res    []nodeResult
}

// nodeResult is the outcome of one call on its node: refused when the
// node answered with an error reply (nothing of it counts; its keys go
// again by slot), else the reply or the error.
type nodeResult struct {
	vals    []int64
	err     error
	refused bool
}

// keyRef is key k of call i.
type keyRef struct{ call, key int }

func appendCall(refs []keyRef, call, keys int) []keyRef {
	for k := range keys {
		refs = append(refs, keyRef{call, k})
	}
	return refs
}

func allKeys(calls []scripts.Call, errs []error) []keyRef {
	var refs []keyRef
	for i, c := range calls {
		if errs[i] == nil {
			refs = appendCall(refs, i, len(c.Keys))
		}
	}
	return refs
}

// runNode sends n's calls, as the cross-slot variant, in one DoMulti on
// n's client (WAIT last, with sync), again by EVAL for those whose script
// the node lacks.
func (r *Rueidis) runNode(ctx context.Context, n *nodeCalls, calls []scripts.Call, synced *Synced) {
	rc := r.client
	args := make([][]string, len(n.idx))
	cmds := make(rueidis.Commands, 0, len(n.idx)+1)
	for j, i := range n.idx {
		args[j] = scripts.CrossSlotArgs(calls[i])
		cmds = append(cmds, rc.B().Evalsha().Sha1(r.cross(calls[i].Script).sha).Numkeys(0).Arg(args[j]...).Build())
	}
	if synced != nil {
		cmds = append(cmds, synced.waitCmd())
	}
	res := n.client.DoMulti(ctx, cmds...)
	// Whether the node answered tells where to read the slot map next
	// (nodeRoutes.pick). A node that did not answer may be gone (a
	// failover promotes its replica, and the map names the dead master
	// until it is read again): the map is read again beside the next
	// rounds, from a node that answers.
	answered := res[0].NonRedisError() == nil
	r.routes.heard(n.addr, answered)
	if !answered {
		r.routes.stale.Store(true)
	}
	var again rueidis.Commands
	var againIdx []int
	for j := range n.idx {
		if rerr, ok := rueidis.IsRedisErr(res[j].Error()); ok && rerr.IsNoScript() {
			again = append(again, rc.B().Eval().Script(r.cross(calls[n.idx[j]].Script).src).Numkeys(0).Arg(args[j]...).Build())
			againIdx = append(againIdx, j)
		}
	}
	if len(again) > 0 {
		if synced != nil {
			again = append(again, synced.waitCmd())
		}
		res2 := n.client.DoMulti(ctx, again...)
		for k, j := range againIdx {
			res[j] = res2[k]
		}
		if synced != nil {
			// The second WAIT follows every write of the first pipeline
			// too, on the same node: its count covers them all.
			res[len(n.idx)] = res2[len(againIdx)]
		}
	}
	n.res = make([]nodeResult, len(n.idx))
	var acks int64
	var waitErr error
	if synced != nil {
		acks, waitErr = res[len(n.idx)].AsInt64()
	}
	for j := range n.idx {
		msg, err := res[j].ToMessage()
		if err != nil {
			if rerr, ok := rueidis.IsRedisErr(err); ok {
				if crossSlotUnsupported(rerr.Error()) {
					r.routes.off.Store(true)
				}
				n.res[j].refused = true
				continue
			}
			n.res[j].err = err
			continue
		}
		vals, err := intsInto(nil, msg)
		switch {
		case err != nil:
			n.res[j].err = err
		case len(vals) != len(calls[n.idx[j]].Keys):
			n.res[j].err = fmt.Errorf("holdfast: %d replies to a renewal of %d keys", len(vals), len(calls[n.idx[j]].Keys))
		case synced != nil && waitErr != nil:
			// The calls ran: their outcome is unknown to the caller, so
			// the error must not look like a refusal (%v: Ambiguous).
			n.res[j].err = fmt.Errorf("holdfast: WAIT after a renewal: %v", waitErr)
		case synced != nil && acks < synced.replicas:
			n.res[j].err = errUnsynced{synced.shortErr(acks, calls[n.idx[j]].Script.Name)}
		default:
			n.res[j].vals = vals
		}
	}
}

// crossSlotUnsupported tells whether an error reply says the server cannot
// run a script with a shebang (Redis before 7.0): renewals then go by slot
// from then on.
func crossSlotUnsupported(msg string) bool {
	return strings.Contains(msg, "Error compiling script") || strings.Contains(msg, "shebang")
}

// whole runs calls as they are, on a standalone server or through
// Sentinel: in one DoMulti, or with sync each call's own script-and-WAIT
// pair.
func (r *Rueidis) whole(ctx context.Context, calls []scripts.Call, out [][]bool, errs []error, synced *Synced) {
	if synced != nil {
		r.eachSynced(ctx, calls, out, errs, synced)
		return
	}
	send := make([]scripts.Call, 0, len(calls))
	idx := make([]int, 0, len(calls))
	for i, c := range calls {
		if errs[i] == nil {
			send = append(send, c)
			idx = append(idx, i)
		}
	}
	for j, res := range r.evalMulti(ctx, send) {
		i := idx[j]
		var vals []int64
		msg, err := res.ToMessage()
		if err == nil {
			vals, err = intsInto(make([]int64, 0, len(calls[i].Keys)), msg)
		}
		if err == nil && len(vals) != len(calls[i].Keys) {
			err = errors.New("holdfast: reply length differs from batch length")
		}
		if err != nil {
			errs[i] = err
			continue
		}
		for k, v := range vals {
			out[i][k] = v == 1
		}
	}
}

// eachSynced runs each of calls as its own script-and-WAIT pair, a few
// at a time, and puts the outcomes in out and errs.
func (r *Rueidis) eachSynced(ctx context.Context, calls []scripts.Call, out [][]bool, errs []error, synced *Synced) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxSyncBySlot)
	for i, c := range calls {
		if errs[i] != nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			got, err := synced.Renew(ctx, c.Script, c.Keys, c.Args)
			if err == nil && len(got) != len(c.Keys) {
				err = errors.New("holdfast: reply length differs from batch length")
			}
			if err != nil {
				errs[i] = err
			} else {
				copy(out[i], got)
			}
			<-sem
		}()
	}
	wg.Wait()
}

// bySlot runs the keys refs of calls again, one call per script and slot,
// through the path that follows MOVED and ASK: the cluster client's
// DoMulti, or with sync each call's own script-and-WAIT pair (execWait).
// Each key's outcome lands in out; an error fails the call it came from.
func (r *Rueidis) bySlot(ctx context.Context, calls []scripts.Call, refs []keyRef, out [][]bool, errs []error, synced *Synced) {
	type group struct {
		script *scripts.Script
		slot   uint16
	}
	var order []group
	groups := make(map[group][]keyRef)
	for _, ref := range refs {
		c := calls[ref.call]
		g := group{c.Script, Slot(c.Keys[ref.key])}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], ref)
	}
	slotCalls := make([]scripts.Call, len(order))
	for j, g := range order {
		sc := scripts.Call{Script: g.script}
		for _, ref := range groups[g] {
			c := calls[ref.call]
			sc.Keys = append(sc.Keys, c.Keys[ref.key])
			sc.Args = append(sc.Args, c.Args[2*ref.key], c.Args[2*ref.key+1])
		}
		slotCalls[j] = sc
	}
	results := make([][]bool, len(slotCalls))
	resErrs := make([]error, len(slotCalls))
	if synced == nil {
		for j, res := range r.evalMulti(ctx, slotCalls) {
			results[j], resErrs[j] = bools(res)
		}
	} else {
		var wg sync.WaitGroup
		sem := make(chan struct{}, maxSyncBySlot)
		for j, sc := range slotCalls {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				results[j], resErrs[j] = synced.Renew(ctx, sc.Script, sc.Keys, sc.Args)
				<-sem
			}()
		}
		wg.Wait()
	}
	for j, g := range order {
		for k, ref := range groups[g] {
			if err := resErrs[j]; err != nil || len(results[j]) != len(groups[g]) {
				if err == nil {
					err = errors.New("holdfast: reply length differs from batch length")
				}
				errs[ref.call] = err
				continue
			}
			out[ref.call][ref.key] = results[j][k]
		}
	}
}

// maxSyncBySlot bounds the script-and-WAIT pairs bySlot has out at once.
const maxSyncBySlot = 16
