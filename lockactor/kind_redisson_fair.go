package lockactor

import "github.com/holdfast/holdfast/scripts"

// RedissonFair is the fair lock (Client.FairLock) under the Redisson
// layout: an RFairLock. Its protocol is in scripts/redisson_fair_*.lua:
// waiters of every process, Go and Java, queue in Redisson's line in the
// order they asked; the lock goes to the head of the line when it is free,
// and a release tells only that waiter, on its own channel (so a client
// listens on the channel of the head of its local queue: HeadChannel). A
// Go waiter keeps its place alive every WaiterTimeout/3 (its deadline then
// WaiterTimeout away, plus one for each waiter ahead of it) and leaves it
// when it gives up; a dead process's places lapse at their deadlines, a
// dead head being dropped by the next script that looks, as Redisson
// drops its own. Holds are renewed as an
// RLock's; tokens come from RFencedLock's counter, raised by every Go
// grant (Java's RFairLock does not raise it).
var RedissonFair = &Kind{
	Name: Fair.Name,
	Acquire: func(env Env, r *Request, expected int64) scripts.Call {
		mode := "take"
		if r.Wait == 0 {
			mode = "try"
		}
		var behind []string
		if expected == 0 && mode == "take" {
			behind = env.Behind
		}
		keys, args := scripts.RedissonFairAcquireCall(env.Name, r.Field, r.Lease, env.Cfg.WaiterTimeout, expected, mode, behind...)
		return scripts.Call{Script: scripts.RedissonFairAcquireScript, Keys: keys, Args: args}
	},
	Place: func(env Env, rs []*Request) scripts.Call {
		more := make([]string, 0, len(rs)-1)
		for _, r := range rs[1:] {
			more = append(more, r.Field)
		}
		keys, args := scripts.RedissonFairAcquireCall(env.Name, rs[0].Field, rs[0].Lease, env.Cfg.WaiterTimeout, 0, "place", more...)
		return scripts.Call{Script: scripts.RedissonFairAcquireScript, Keys: keys, Args: args}
	},
	DecodeAcquire: DecodeAcquire,
	Release: func(env Env, field string, expected int64) scripts.Call {
		keys, args := scripts.RedissonFairReleaseCall(env.Name, field, expected)
		return scripts.Call{Script: scripts.RedissonFairReleaseScript, Keys: keys, Args: args}
	},
	DecodeRelease: decodeInt,
	Renew:         scripts.RedissonRenewScript,
	RenewKey:      redissonKey,
	KeepAlive:     scripts.RedissonFairKeepAliveScript,
	KeepAliveKey:  scripts.RedissonFairTimeoutKey,
	Channel:       scripts.RedissonFairChannel,
	HeadChannel:   true,
}
