package lockactor

import (
	"strconv"

	"github.com/holdfast/holdfast/scripts"
)

// Fair is the fair lock (Client.FairLock): a reentrant lock granted in the
// order requests reached Redis, across processes. Its protocol is in
// scripts/fair_*.lua: waiters queue in Redis; the release that frees the
// lock grants it to the longest-waiting live waiter inside the script and
// tells only that waiter's client, on its own channel; the grantee confirms
// with its next acquire call, which starts its lease (its validity is dated
// from that call). Every waiter takes its place when it arrives and its
// client keeps the place alive every WaiterTimeout/3; a dead process's
// places lapse after WaiterTimeout, and a grant nobody confirms within
// WaiterTimeout passes on. Nobody barges: no local handoff, and a new
// request queues behind every waiter already there.
var Fair = &Kind{
	Name: "fair",
	Acquire: func(env Env, r *Request, expected int64) scripts.Call {
		mode := "take"
		if r.Wait == 0 {
			mode = "try"
		}
		c := fairAcquire(env, r, expected, mode)
		if expected == 0 && mode == "take" {
			c.Args = append(c.Args, env.Behind...)
		}
		return c
	},
	Place: func(env Env, rs []*Request) scripts.Call {
		c := fairAcquire(env, rs[0], 0, "place")
		for _, r := range rs[1:] {
			c.Args = append(c.Args, r.Field)
		}
		return c
	},
	DecodeAcquire: DecodeAcquire,
	Release: func(env Env, field string, expected int64) scripts.Call {
		return scripts.Call{
			Script: scripts.FairReleaseScript,
			Keys:   fairKeys(env.Name),
			Args: []string{field, strconv.FormatInt(expected, 10), scripts.Millis(env.Cfg.WaiterTimeout),
				scripts.ClientChannel(env.Name, "")},
		}
	},
	DecodeRelease: decodeInt,
	Renew:         scripts.FairRenewScript,
	KeepAlive:     scripts.FairKeepAliveScript,
	KeepAliveKey:  scripts.FairQueueKey,
	Channel:       scripts.ClientChannel,
}

func fairAcquire(env Env, r *Request, expected int64, mode string) scripts.Call {
	return scripts.Call{
		Script: scripts.FairAcquireScript,
		Keys:   fairKeys(env.Name),
		Args: []string{r.Field, scripts.Millis(r.Lease), strconv.FormatInt(expected, 10),
			scripts.Millis(env.Cfg.WaiterTimeout), mode, scripts.ClientChannel(env.Name, "")},
	}
}

func fairKeys(name string) []string {
	return scripts.GrantKeys(name, scripts.FairQueueKey(name))
}
