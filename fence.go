package holdfast

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/actor"
	"github.com/holdfast/holdfast/scripts"
)

// The RedLock fence call: raising a node's fence counter to a floor.

// scriptRunner is implemented by an engine that runs script calls itself
// (the simulator), so that a composite's calls run inside its schedule.
type scriptRunner interface {
	Eval(script string, keys, args []string, done func(int64, error))
}

var fenceRaiseScript = rueidis.NewLuaScript(scripts.FenceRaise)

// raiseFence queues the fence call for part's node; done runs under the
// composite's mu with the counter after the call.
func (c *composite) raiseFence(part int, floor uint64, done func(*composite, uint64, error)) {
	t := c.targets[part]
	cb := func(v int64, err error) {
		c.do(func() { done(c, uint64(max(v, 0)), err) })
	}
	c.out = append(c.out, func() { t.Client.raiseFence(t.Name, floor, cb) })
}

// raiseFence runs scripts.FenceRaise for name with floor on this Client's
// deployment and calls done with the counter after it. On a production
// Client the call runs on a goroutine of its own, which ends with the call:
// the call is bounded by CallTimeout on the Client's clock.
func (cl *Client) raiseFence(name string, floor uint64, done func(int64, error)) {
	keys := scripts.GrantKeys(name)
	args := []string{strconv.FormatUint(floor, 10)}
	src, script := scripts.FenceRaise, fenceRaiseScript
	if cl.cfg.Layout == LayoutRedisson {
		keys = []string{scripts.RedissonTokenKey(name)}
		src, script = scripts.RedissonFenceRaise, redissonFenceRaiseScript
	}
	if r, ok := cl.eng.(scriptRunner); ok {
		r.Eval(src, keys, args, done)
		return
	}
	if cl.cfg.Redis == nil {
		done(0, fmt.Errorf("%w: the Client has no Redis to raise the fence on", ErrInvalidOption))
		return
	}
	go func() {
		var ctx context.Context
		var cancel context.CancelFunc
		if actor.IsWallClock(cl.cfg.Clock) {
			// A deadline keeps the connection on rueidis' synchronous path
			// (see actor.IsWallClock).
			ctx, cancel = context.WithTimeout(context.Background(), cl.cfg.CallTimeout)
		} else {
			ctx, cancel = context.WithCancel(context.Background())
			timer := cl.cfg.Clock.AfterFunc(cl.cfg.CallTimeout, cancel)
			defer timer.Stop()
		}
		v, err := script.Exec(ctx, cl.cfg.Redis, keys, args).AsInt64()
		cancel()
		done(v, err)
	}()
}
