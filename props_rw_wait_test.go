package holdfast_test

import (
	"fmt"
	"strings"
	"time"

	"pgregory.net/rapid"

	"github.com/holdfast/holdfast/sim"
)

// The bound on a writer's wait (WriteLock's doc, lockactor's "Read-write
// lock"), checked over the history after every action of the read-write
// properties: a waiting writer waits for holds, never for a reader that
// waits. Across Clients its claim in Redis holds new readers back (writer
// preference, TestRWWriterPreference); within its own Client the local queue
// must do the same, and it is what this check watches: while a WriteLock
// waits, no reader of its Client on the name that was not holding when it
// asked is granted before it. The opposite once happened: a reader that
// another Client's waiting writer held back stood at the head of its
// Client's queue, and the Client's own writer waited behind it for as long
// as the other Client kept a writer waiting.
//
// Exempt are the grants the local queue cannot stop, each recognisable in
// the history:
//
//   - a reader whose try was already on its way when the writer asked: its
//     script runs within one message delay of the writer's arrival;
//   - a reader whose earlier try got no answer (it may hold in Redis, so it
//     tries again before anyone else of its Client): a call of the Client
//     on the name failed since the longest backoff before the writer asked;
//   - a reader whose owner held the write lock while it waited (write →
//     read is granted whatever waits);
//   - reentries, which take no new token.

// rwRetrySpan is the longest a request whose try got no answer waits before
// trying again: lockactor's MaxBackoff (1s) on the slowest drawn clock, with
// room to spare.
const rwRetrySpan = 1100 * time.Millisecond

// checkWriterWait fails when a reader of a waiting writer's own Client was
// granted before it (see above).
func (p *rwWorld) checkWriterWait(t *rapid.T) {
	type ask struct {
		at          time.Time
		name, field string
	}
	type grant struct {
		client, name, field string
		req                 uint64
		ran, at             time.Time
	}
	type span struct {
		owner    string // client/owner field without its mode
		name     string
		from, to time.Time
	}
	asked := map[string]ask{}          // by client/req
	ended := map[string]time.Time{}    // client/req → its grant's script run (Redis time) or its Lost
	started := map[string]grant{}      // client/req → its first grant
	failed := map[string][]time.Time{} // client/name → calls that failed
	tokens := map[string]bool{}        // client/name/field/token of every grant so far
	var reads []grant                  // fresh read grants
	var writes []span                  // write holds, from grant to Lost
	lost := map[string]bool{}          // client/req of every Lost
	ref := func(e sim.Event) string { return fmt.Sprintf("%s/%d", e.Client, e.Req) }
	owner := func(client, field string) string { return client + "/" + field[:len(field)-2] }
	for _, e := range p.w.History() {
		switch e.Kind {
		case sim.Enqueued:
			if e.Lock == "rw" {
				asked[ref(e)] = ask{at: e.At, name: e.Name, field: e.Field}
			}
		case sim.Acquired:
			if _, ok := started[ref(e)]; !ok {
				started[ref(e)] = grant{client: e.Client, name: e.Name, field: e.Field, req: e.Req, ran: e.GrantedAt, at: e.At}
				if _, ok := ended[ref(e)]; !ok {
					ended[ref(e)] = e.GrantedAt
				}
			}
			hold := fmt.Sprintf("%s/%s/%s/%d", e.Client, e.Name, e.Field, e.Token)
			if !tokens[hold] && strings.HasSuffix(e.Field, ":r") {
				reads = append(reads, grant{client: e.Client, name: e.Name, field: e.Field, req: e.Req, ran: e.GrantedAt, at: e.At})
			}
			tokens[hold] = true
		case sim.Lost:
			lost[ref(e)] = true
			if _, ok := ended[ref(e)]; !ok {
				ended[ref(e)] = e.At
			}
			if g, ok := started[ref(e)]; ok && strings.HasSuffix(g.field, ":w") {
				writes = append(writes, span{owner: owner(e.Client, g.field), name: e.Name, from: g.at, to: e.At})
			}
		case sim.CallFailed:
			failed[e.Client+"/"+e.Name] = append(failed[e.Client+"/"+e.Name], e.At)
		}
	}
	for ref, g := range started {
		if !lost[ref] && strings.HasSuffix(g.field, ":w") {
			writes = append(writes, span{owner: owner(g.client, g.field), name: g.name, from: g.at, to: p.w.Now()})
		}
	}
	// heldWrite: who held the write lock on name at some time in [from, to].
	heldWrite := func(who, name string, from, to time.Time) bool {
		for _, s := range writes {
			if s.owner == who && s.name == name && !to.Before(s.from) && !from.After(s.to) {
				return true
			}
		}
		return false
	}
	failedBetween := func(key string, from, to time.Time) bool {
		for _, at := range failed[key] {
			if !at.Before(from) && !at.After(to) {
				return true
			}
		}
		return false
	}
	for wref, w := range asked {
		if !strings.HasSuffix(w.field, ":w") {
			continue
		}
		client := wref[:strings.LastIndexByte(wref, '/')]
		if heldWrite(owner(client, w.field), w.name, w.at, w.at) {
			continue // a reentry of a write hold waits for no one
		}
		end, over := ended[wref]
		if !over {
			end = p.w.Now()
		}
		for _, r := range reads {
			if r.client != client || r.name != w.name || !r.ran.Before(end) || !r.ran.After(w.at.Add(p.maxDelay)) {
				continue
			}
			rask := asked[fmt.Sprintf("%s/%d", r.client, r.req)]
			if heldWrite(owner(r.client, r.field), r.name, rask.at, r.at) ||
				failedBetween(client+"/"+w.name, w.at.Add(-rwRetrySpan), r.ran) {
				continue
			}
			t.Fatalf("writer wait: %s's WriteLock %s on %q asked at %v, not granted yet, when its own reader %s (asked at %v) was granted at %v (max delay %v)",
				client, w.field, w.name, w.at.Sub(sim.Start), r.field, rask.at.Sub(sim.Start), r.ran.Sub(sim.Start), p.maxDelay)
		}
	}
}

// checkClaim is writer preference across Clients (rw_acquire.lua), checked
// over the history after every action: once a waiting writer's claim is in
// Redis, no fresh read hold of another Client is granted until the writer
// is granted or gives up — a Client that holds a read lock on the name
// included (its new owners are new readers), only an owner that holds the
// name already re-enters. The claim is known to be in Redis once the
// writer's first try has surely run: the writer asked with nothing else of
// its Client on the name (so it tried at once), two message delays before
// the reader's grant ran, and was still waiting one round trip later (a
// try-once writer, which leaves no claim, has ended by then).
//
// Exempt, as the history shows them, are the grants the claim cannot stop:
// a claim a failover or restart may have lost, or one a paused Client let
// lapse; a writer whose Client's calls on the name failed (its try or its
// keep-alive may not have reached Redis); a reader whose owner held the
// name when it asked, or whose own earlier try got no answer (it may have
// been granted before the claim, and its repeat answers that grant).
func (p *rwWorld) checkClaim(t *rapid.T) {
	type req struct {
		client, name, field string
		at, end             time.Time // asked; granted (script run) or Lost
		over                bool
	}
	type readGrant struct {
		client, name, field, ref string
		ran                      time.Time
	}
	type span struct {
		owner, name string
		from, to    time.Time
	}
	reqs := map[string]*req{}
	var order []string
	var reads []readGrant
	var holds []span // every hold, by owner (client/owner field without mode)
	grantAt := map[string]time.Time{}
	lost := map[string]bool{}
	failed := map[string][]time.Time{}
	tokens := map[string]bool{}
	ref := func(e sim.Event) string { return fmt.Sprintf("%s/%d", e.Client, e.Req) }
	owner := func(client, field string) string { return client + "/" + field[:len(field)-2] }
	for _, e := range p.w.History() {
		switch e.Kind {
		case sim.Enqueued:
			if e.Lock == "rw" {
				reqs[ref(e)] = &req{client: e.Client, name: e.Name, field: e.Field, at: e.At}
				order = append(order, ref(e))
			}
		case sim.Acquired:
			if q := reqs[ref(e)]; q != nil && !q.over {
				q.end, q.over = e.GrantedAt, true
			}
			if _, ok := grantAt[ref(e)]; !ok {
				grantAt[ref(e)] = e.At
			}
			hold := fmt.Sprintf("%s/%s/%s/%d", e.Client, e.Name, e.Field, e.Token)
			if !tokens[hold] && strings.HasSuffix(e.Field, ":r") {
				reads = append(reads, readGrant{client: e.Client, name: e.Name, field: e.Field, ref: ref(e), ran: e.GrantedAt})
			}
			tokens[hold] = true
		case sim.Lost:
			if q := reqs[ref(e)]; q != nil && !q.over {
				q.end, q.over = e.At, true
			}
			lost[ref(e)] = true
			if from, ok := grantAt[ref(e)]; ok {
				holds = append(holds, span{owner: owner(e.Client, e.Field), name: e.Name, from: from, to: e.At})
			}
		case sim.CallFailed:
			failed[e.Client+"/"+e.Name] = append(failed[e.Client+"/"+e.Name], e.At)
		}
	}
	now := p.w.Now()
	for r, from := range grantAt {
		if q := reqs[r]; q != nil && !lost[r] {
			holds = append(holds, span{owner: owner(q.client, q.field), name: q.name, from: from, to: now})
		}
	}
	held := func(who, name string, from, to time.Time) bool {
		for _, s := range holds {
			if s.owner == who && s.name == name && !to.Before(s.from) && !from.After(s.to) {
				return true
			}
		}
		return false
	}
	failedBetween := func(key string, from, to time.Time) bool {
		for _, at := range failed[key] {
			if !at.Before(from) && !at.After(to) {
				return true
			}
		}
		return false
	}
	faultBetween := func(from, to time.Time) bool {
		for _, at := range p.dataFaults {
			if !at.Before(from) && !at.After(to) {
				return true
			}
		}
		return false
	}
	cutBetween := func(client string, from, to time.Time) bool {
		for i, id := range p.ids {
			if id != client {
				continue
			}
			for _, s := range p.pauses[i] {
				if !s[0].After(to) && (s[1].IsZero() || !s[1].Before(from)) {
					return true
				}
			}
			if p.paused[i] && !p.pausedAt[i].After(to) {
				return true
			}
			for _, c := range p.cutOff {
				if c.client == i && !c.from.After(to) && (c.to.IsZero() || !c.to.Before(from)) {
					return true
				}
			}
		}
		return false
	}
	settle := 2 * p.maxDelay // the writer's first try has run by then
	for _, wref := range order {
		w := reqs[wref]
		if !strings.HasSuffix(w.field, ":w") {
			continue
		}
		end := now
		if w.over {
			end = w.end
		}
		if !end.After(w.at.Add(2 * settle)) {
			continue // granted at once, refused, or tried once: no claim to check
		}
		alone := true // nothing else of the writer's Client on the name when it asked
		for _, q := range reqs {
			if q != w && q.client == w.client && q.name == w.name && !q.at.After(w.at) &&
				(!q.over || !q.end.Before(w.at.Add(-rwRetrySpan))) {
				alone = false
				break
			}
		}
		if !alone || held(owner(w.client, w.field), w.name, w.at.Add(-rwRetrySpan), w.at) {
			continue
		}
		for _, r := range reads {
			if r.client == w.client || r.name != w.name || !r.ran.After(w.at.Add(settle)) || !r.ran.Before(end) {
				continue
			}
			rq := reqs[r.ref]
			if rq == nil || faultBetween(w.at.Add(-rwRetrySpan), r.ran) || cutBetween(w.client, w.at.Add(-rwRetrySpan), r.ran) ||
				failedBetween(w.client+"/"+w.name, w.at.Add(-rwRetrySpan), end) ||
				failedBetween(r.client+"/"+r.name, rq.at.Add(-rwRetrySpan), r.ran) ||
				held(owner(r.client, r.field), r.name, rq.at.Add(-rwRetrySpan), r.ran) {
				continue
			}
			t.Fatalf("writer preference: %s's WriteLock %s on %q asked at %v, waiting (its claim in Redis), when %s's new reader %s (asked at %v) was granted at %v (max delay %v)",
				w.client, w.field, w.name, w.at.Sub(sim.Start), r.client, r.field, rq.at.Sub(sim.Start), r.ran.Sub(sim.Start), p.maxDelay)
		}
	}
}
