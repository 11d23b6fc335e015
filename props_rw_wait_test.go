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
// asked is granted before it. Issue 39 met the opposite: a reader that
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
