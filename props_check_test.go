package holdfast_test

import (
	"fmt"
	"sort"
	"time"

	"pgregory.net/rapid"

	"github.com/holdfast/holdfast/sim"
)

// The invariants the property tests check after every action, judged from
// the World's history (what the Locks were told and when the scripts behind
// it ran) and its list of disruptions, never from Redis key names.

// hold is the validity interval of one grant, in World time.
type hold struct {
	client, field, name string
	req                 uint64
	from, to            time.Time
	token               uint64
	gen                 int
	releasing           bool
	granted             time.Time // when the grant ran in Redis
	// origin and originGen: when and in which data generation the owner's
	// hold began. A reentry shares its owner's hold (its deadline and
	// token are the owner's), so a roll-back after the owner's first grant
	// ends it in Redis whatever the reentry's own script saw.
	origin    time.Time
	originGen int
}

// holds rebuilds every grant's interval from the history: from Acquired to
// the earliest of Lost, the holder's giving it up (Release or its context
// ending), and the last validity deadline it was told of.
func holds(w *sim.World) []hold {
	open := map[string]*hold{}
	var out []hold
	key := func(e sim.Event) string { return fmt.Sprintf("%s/%d", e.Client, e.Req) }
	for _, e := range w.History() {
		switch e.Kind {
		case sim.Acquired:
			open[key(e)] = &hold{client: e.Client, field: e.Field, name: e.Name, req: e.Req, from: e.At, to: e.DeadlineAt,
				token: e.Token, gen: e.Generation, granted: e.GrantedAt}
		case sim.Renewed:
			if h := open[key(e)]; h != nil && e.DeadlineAt.After(h.to) && !h.releasing {
				h.to = e.DeadlineAt
			}
		case sim.Releasing:
			// The holder gave the lock up: it no longer acts on it.
			if h := open[key(e)]; h != nil && e.At.Before(h.to) {
				h.to, h.releasing = e.At, true
			}
		case sim.Lost:
			if h := open[key(e)]; h != nil {
				if e.At.Before(h.to) {
					h.to = e.At
				}
				out = append(out, *h)
				delete(open, key(e))
			}
		}
	}
	for _, h := range open {
		if w.Now().Before(h.to) {
			h.to = w.Now()
		}
		out = append(out, *h)
	}
	for i := range out {
		h := &out[i]
		h.origin, h.originGen = h.granted, h.gen
		for _, g := range out {
			if g.name == h.name && g.client == h.client && g.field == h.field &&
				!g.from.After(h.from) && !g.to.Before(h.from) && g.granted.Before(h.origin) {
				h.origin, h.originGen = g.granted, g.gen
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].from.Equal(out[j].from) {
			return out[i].from.Before(out[j].from)
		}
		if out[i].client != out[j].client {
			return out[i].client < out[j].client
		}
		return out[i].req < out[j].req
	})
	return out
}

func (p *propWorld) check(t *rapid.T) {
	// Liveness (b): a try-once Lock is decided within one call, whatever
	// the faults (a partitioned client's call times out), unless its client
	// was paused.
	for _, tr := range p.locks {
		if tr.tryOnce && !tr.paused && !isClosed(tr.l.Acquired) && !isClosed(tr.l.Lost) && p.w.Now().Sub(tr.at) > p.oneTry {
			t.Fatalf("one try: a WithWait(0) Lock made at %v is still pending at %v (bound %v)",
				tr.at.Sub(sim.Start), p.w.Now().Sub(sim.Start), p.oneTry)
		}
	}
	hs := holds(p.w)
	// Exclusion: no two owners validly hold one name at the same instant,
	// unless a disruption lies between the two grants: a data roll-back
	// (asynchronous replication does not promise exclusion across one) or
	// the theft of that name's key ended the earlier hold in Redis behind
	// its holder's back. Holds granted on the same side of every disruption
	// still exclude each other.
	ds := p.w.Disruptions()
	for i := range hs {
		for j := i + 1; j < len(hs); j++ {
			a, b := hs[i], hs[j] // a.from <= b.from
			if a.name != b.name || (a.client == b.client && a.field == b.field) {
				continue
			}
			end := a.to
			if b.to.Before(end) {
				end = b.to
			}
			if !b.from.Before(end) {
				continue
			}
			first, second := a.origin, b.origin
			if second.Before(first) {
				first, second = second, first
			}
			if _, ok := disruptionBetween(ds, a.name, first, second); ok {
				continue
			}
			t.Fatalf("exclusion: %s %s held %q [%v, %v] (granted at %v) while %s %s held it [%v, %v] (granted at %v)",
				a.client, a.field, a.name, a.from.Sub(sim.Start), a.to.Sub(sim.Start), a.granted.Sub(sim.Start),
				b.client, b.field, b.from.Sub(sim.Start), b.to.Sub(sim.Start), b.granted.Sub(sim.Start))
		}
	}
	// Lost before Redis can give the lock away: no validity deadline a
	// holder is told of lies past the expiry the calls for its hold left in
	// Redis. TTLs are only extended, so the latest expiry any call of the
	// hold (its grant, reentries, renewals: replies may come in any order)
	// has seen bounds the key's life. A hold is one owner's grant with one
	// token, joined by reentries while any of its Locks is held. The check is
	// exact within the data generation the telling call's script ran in;
	// a deadline already told is not told again by a later event, so a
	// roll-back that lost the renewal behind it (which holdfast does not
	// promise to survive) is not charged to the reentry that repeats it.
	// A renewal that lands while none of the field's Locks is held (its
	// last one just ended, a reentry is in flight) still extends the key:
	// it bounds the hold too if it ran after the hold began in Redis.
	type holdSeen struct {
		told    time.Time
		expires map[int]time.Time // by the generation the calls ran in
		open    int
		// origin and gen: when and in which generation the hold's first
		// grant ran in Redis.
		origin time.Time
		gen    int
	}
	grantedAt := map[string]time.Time{}
	byReq := map[string]*holdSeen{}
	byOwner := map[string]*holdSeen{}
	extended := map[string][]sim.Event{} // by client/field/name
	fieldKey := func(e sim.Event) string { return fmt.Sprintf("%s/%s/%s", e.Client, e.Field, e.Name) }
	for _, e := range p.w.History() {
		key := fmt.Sprintf("%s/%d", e.Client, e.Req)
		switch e.Kind {
		case sim.Acquired:
			grantedAt[key] = e.GrantedAt
			owner := fmt.Sprintf("%s/%d", fieldKey(e), e.Token)
			h := byOwner[owner]
			if h == nil || h.open == 0 {
				// A new hold of the Locks. With the token and data of
				// an earlier one it continues that hold in Redis (a
				// reentry answered after the field's last Lock ended).
				fresh := &holdSeen{expires: map[int]time.Time{}, origin: e.GrantedAt, gen: e.Generation}
				if h != nil && h.gen == e.Generation {
					fresh.origin = h.origin
				}
				h = fresh
				byOwner[owner] = h
			}
			h.open++
			byReq[key] = h
		case sim.Lost:
			if h := byReq[key]; h != nil {
				h.open--
				delete(byReq, key)
			}
		case sim.Extended:
			extended[fieldKey(e)] = append(extended[fieldKey(e)], e)
		}
		if h := byReq[key]; h != nil && (e.Kind == sim.Acquired || e.Kind == sim.Renewed) && !e.ExpiresAt.IsZero() {
			if e.ExpiresAt.After(h.expires[e.Generation]) {
				h.expires[e.Generation] = e.ExpiresAt
			}
			if e.DeadlineAt.After(h.told) {
				h.told = e.DeadlineAt
				bound := h.expires[e.Generation]
				for _, x := range extended[fieldKey(e)] {
					if x.Generation == e.Generation && !x.RanAt.Before(h.origin) && x.ExpiresAt.After(bound) {
						bound = x.ExpiresAt
					}
				}
				if e.DeadlineAt.After(bound) {
					t.Fatalf("validity: %s %s was told it holds %q until %v, but Redis expires the key at %v",
						e.Client, e.Field, e.Name, e.DeadlineAt.Sub(sim.Start), bound.Sub(sim.Start))
				}
			}
		}
		// A key deleted behind a holder's back is never renewed for it again
		// by a script that ran after the deletion (unless a data roll-back
		// since brought the key back).
		if e.Kind == sim.Renewed {
			for _, d := range ds {
				if d.Name != e.Name || d.At.Before(grantedAt[key]) || !d.At.Before(e.RanAt) {
					continue
				}
				if _, rolledBack := disruptionBetween(ds, "", d.At, e.RanAt); !rolledBack {
					t.Fatalf("renewal after theft: %s %s renewed %q by a script run at %v, its key deleted at %v",
						e.Client, e.Field, e.Name, e.RanAt.Sub(sim.Start), d.At.Sub(sim.Start))
				}
			}
		}
	}
	// Fencing: each new owner's token is above the previous owner's, in
	// the order the grants ran in Redis, within one data generation.
	byGrant := append([]hold(nil), hs...)
	sort.SliceStable(byGrant, func(i, j int) bool { return byGrant[i].origin.Before(byGrant[j].origin) })
	last := map[string]hold{}
	for _, h := range byGrant {
		prev, ok := last[h.name]
		if ok && prev.originGen == h.originGen && (prev.client != h.client || prev.field != h.field) && h.token <= prev.token {
			t.Fatalf("fencing: %s got token %d on %q after %s had %d", h.client, h.token, h.name, prev.client, prev.token)
		}
		last[h.name] = h
	}
	// A Lock that ended never comes back.
	for _, tr := range p.locks {
		held := isClosed(tr.l.Acquired)
		if tr.lostSeen && held && !tr.wasHeld {
			t.Fatalf("a Lock that ended with %v was acquired afterwards", tr.l.Err())
		}
		if isClosed(tr.l.Lost) {
			if tr.l.Err() == nil {
				t.Fatal("Lost closed with a nil Err")
			}
			tr.lostSeen = true
		}
		tr.wasHeld = held
	}
}

// disruptionBetween returns the first disruption that can have ended a hold
// on name granted at from and let in a grant at to: a roll-back, or a theft
// of name (name "" asks for roll-backs only), at or after from and before to
// (a fault injected at the instant a script ran came after it).
func disruptionBetween(ds []sim.Disruption, name string, from, to time.Time) (sim.Disruption, bool) {
	for _, d := range ds {
		if (d.Name == "" || d.Name == name) && !d.At.Before(from) && d.At.Before(to) {
			return d, true
		}
	}
	return sim.Disruption{}, false
}
