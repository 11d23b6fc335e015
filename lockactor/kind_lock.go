package lockactor

import (
	"strconv"
	"time"

	"github.com/holdfast/holdfast/scripts"
)

// Reentrant is the reentrant lock (Client.Lock): one owner field at a time
// holds the name, any number of times; its scripts are acquire.lua,
// release.lua, handoff.lua and renew.lua. Waiters keep nothing in Redis:
// they retry when the release is announced on the name's channel, or when
// the holder's TTL has run out.
var Reentrant = &Kind{
	Name: "lock",
	Acquire: func(env Env, r *Request, expected int64) scripts.Call {
		return scripts.Call{
			Script: scripts.AcquireScript,
			Keys:   env.lockKeys().acquire,
			Args:   r.args.use(r.Field, scripts.Millis(r.Lease), strconv.FormatInt(expected, 10)),
		}
	},
	DecodeAcquire: DecodeAcquire,
	Release:       lockRelease,
	DecodeRelease: decodeInt,
	Handoff: func(env Env, from string, to *Request) scripts.Call {
		return scripts.Call{
			Script: scripts.HandoffScript,
			Keys:   env.lockKeys().acquire,
			Args:   []string{from, to.Field, scripts.Millis(to.Lease)},
		}
	},
	DecodeHandoff: DecodeHandoff,
	Renew:         scripts.RenewScript,
	Channel: func(name, _ string) string {
		return scripts.Channel(name)
	},
	YieldAfterRelease: true,
}

func lockRelease(env Env, field string, expected int64) scripts.Call {
	k := env.lockKeys()
	return scripts.Call{
		Script: scripts.ReleaseScript,
		Keys:   k.release,
		Args:   env.args.use(field, strconv.FormatInt(expected, 10), k.channel, flag(env.Waiters)),
	}
}

// lockKeys are the KEYS of the reentrant lock's scripts for one name.
// Calls share the slices: runtimes only read a Call's keys.
type lockKeys struct {
	acquire []string // acquire.lua and handoff.lua: GrantKeys, fair queue
	release []string // release.lua: lock
	channel string
	// The slices' array, kept here: the keys of one name cost two
	// allocations (this and scripts.KeysOf's string), not five.
	acquireKeys [3]string
	// redisson: the name's keys under the Redisson layout, once a call of
	// RedissonLock needed them (kind_redisson.go).
	redisson *redissonKeys
}

func newLockKeys(name string) *lockKeys {
	k := scripts.KeysOf(name)
	lk := &lockKeys{
		acquireKeys: [3]string{k.Lock, k.Fence, k.FairQueue},
		channel:     k.Channel,
	}
	lk.acquire = lk.acquireKeys[:len(lk.acquireKeys):len(lk.acquireKeys)]
	lk.release = lk.acquireKeys[:1:1]
	return lk
}

// lockKeys returns the machine's keys, or builds them for an Env made
// elsewhere.
func (env Env) lockKeys() *lockKeys {
	if env.keys != nil {
		return env.keys
	}
	return newLockKeys(env.Name)
}

// DecodeAcquire decodes the reply of acquire.lua (and of any script that
// answers the same way).
func DecodeAcquire(vals []int64) (AcquireResult, error) {
	if len(vals) < 1 {
		return AcquireResult{}, errMalformedReply
	}
	if len(vals) == 1 && vals[0] > 0 {
		// acquire.lua's short reply, a fresh grant's token alone: no
		// code of a one-element reply is positive.
		return AcquireResult{Code: Granted, Count: 1, Token: uint64(vals[0])}, nil
	}
	res := AcquireResult{Code: vals[0]}
	switch vals[0] {
	case scripts.AcquireGranted:
		if len(vals) < 3 {
			return res, errMalformedReply
		}
		res.Code, res.Count, res.Token = Granted, vals[1], uint64(vals[2])
	case scripts.AcquireHeld:
		if len(vals) < 2 {
			return res, errMalformedReply
		}
		res.Code, res.PTTL = Held, time.Duration(vals[1])*time.Millisecond
	case scripts.AcquireMismatch:
		if len(vals) < 2 {
			return res, errMalformedReply
		}
		res.Code, res.Count = Mismatch, vals[1]
	case scripts.AcquireWrongKind:
		res.Code, res.Err = Refused, ErrWrongKind
	default:
		return res, errMalformedReply
	}
	return res, nil
}

// DecodeHandoff decodes handoff.lua's reply: the release's outcome, then
// the acquire's.
func DecodeHandoff(vals []int64) (left int64, acquire AcquireResult, err error) {
	if len(vals) < 3 {
		return 0, AcquireResult{}, errMalformedReply
	}
	acquire, err = DecodeAcquire(vals[1:])
	return vals[0], acquire, err
}

// decodeInt decodes an integer reply.
func decodeInt(vals []int64) (int64, error) {
	if len(vals) != 1 {
		return 0, errMalformedReply
	}
	return vals[0], nil
}

// flag renders a boolean script argument.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
