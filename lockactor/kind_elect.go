package lockactor

import (
	"github.com/holdfast/holdfast/scripts"
)

// Election is leader election (Client.Elect): one owner field at a time
// leads the name, announcing its request's Value; a grant's token is the
// leader's term. Its scripts are elect_acquire.lua, elect_release.lua and
// elect_renew.lua, whose headers give the protocol.
//
// Policy: as the reentrant lock's. Candidates keep nothing in Redis; every
// grant and every resignation is announced on the name's channel (observers
// listen there too), so a waiting candidate retries when leadership changes
// hands, or at the leader's PTTL at the latest. Reentry (two campaigns of
// one owner) shares the leadership, its term and its first value. No local
// handoff: a resignation publishes, and every process's candidates compete
// on equal terms (YieldAfterRelease).
var Election = &Kind{
	Name: scripts.ElectionKind,
	Acquire: func(env Env, r *Request, expected int64) scripts.Call {
		keys, args := scripts.ElectAcquireCall(env.Name, r.Field, r.Lease, expected, r.Value)
		return scripts.Call{Script: scripts.ElectAcquireScript, Keys: keys, Args: args}
	},
	DecodeAcquire: DecodeAcquire,
	HoldToken:     true,
	Release: func(env Env, field string, expected int64) scripts.Call {
		keys, args := scripts.ElectReleaseCall(env.Name, field, expected)
		return scripts.Call{Script: scripts.ElectReleaseScript, Keys: keys, Args: args}
	},
	DecodeRelease: decodeInt,
	Renew:         scripts.ElectRenewScript,
	Channel: func(name, _ string) string {
		return scripts.Channel(name)
	},
	YieldAfterRelease: true,
}
