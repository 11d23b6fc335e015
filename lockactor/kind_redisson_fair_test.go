package lockactor

import (
	"testing"
	"time"

	"github.com/holdfast/holdfast/scripts"
)

// TestRedissonFairListensOnTheHeadsChannel: a Redisson fair lock wakes a
// waiter on a channel of its own; the machine listens on the channel of
// the head of its local queue, and moves there when the head changes.
func TestRedissonFairListensOnTheHeadsChannel(t *testing.T) {
	d := newDriver(t)
	d.m.cfg.WaiterTimeout = 3 * time.Second
	fair := func(id ReqID, field string) Msg {
		return Msg{Kind: MsgEnqueue, Req: Request{ID: id, Field: field, Lease: lease, Watchdog: true, Wait: -1, Kind: RedissonFair}}
	}
	calls := func(effs []Effect, mode string) []Effect {
		var out []Effect
		for _, e := range effs {
			if e.Kind == EffCall && e.Call.Script == scripts.RedissonFairAcquireScript && e.Call.Args[4] == mode {
				out = append(out, e)
			}
		}
		return out
	}
	subscribed := func(effs []Effect) []string {
		var out []string
		for _, e := range effs {
			if e.Kind == EffSubscribe {
				out = append(out, e.Channel)
			}
		}
		return out
	}
	effs := d.step(fair(1, "id:1"))
	effs = append(effs, d.step(fair(2, "id:2"))...)
	take := calls(effs, "take")
	if len(take) != 1 || take[0].Call.Args[0] != "id:1" {
		t.Fatalf("want the head's attempt, got %v", kinds(effs))
	}
	if got := subscribed(effs); len(got) != 1 || got[0] != scripts.RedissonFairChannel("n", "id:1") {
		t.Fatalf("subscribed to %v, want the head's own channel", got)
	}
	// Confirmed while the attempt is in flight: once it is refused, one
	// more look, for a message sent before the subscription.
	d.step(Msg{Kind: MsgSubscribed})
	take = calls(d.step(held(take[0].Op, time.Second)), "take")
	if len(take) != 1 {
		t.Fatal("no look after the subscription was confirmed")
	}
	d.step(held(take[0].Op, time.Second))
	// The head's message: it tries and is granted.
	effs = d.step(Msg{Kind: MsgWake})
	take = calls(effs, "take")
	if len(take) != 1 || take[0].Call.Args[0] != "id:1" {
		t.Fatalf("after the head's message, want its attempt, got %v", kinds(effs))
	}
	effs = d.step(granted(take[0].Op, 1, 5))
	if got := subscribed(effs); len(got) != 1 || got[0] != scripts.RedissonFairChannel("n", "id:2") {
		t.Fatalf("after the grant subscribed to %v, want the new head's channel (effects %v)", got, kinds(effs))
	}
	if indexOf(effs, EffUnsubscribe) < 0 || indexOf(effs, EffUnsubscribe) > indexOf(effs, EffSubscribe) {
		t.Fatalf("want the old head's channel left first: %v", kinds(effs))
	}
}
