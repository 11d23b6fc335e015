package lockactor

import (
	"github.com/holdfast/holdfast/scripts"
)

// Modes of a read-write request (Request.Mode).
const (
	ModeRead  = uint8(scripts.RWRead)
	ModeWrite = uint8(scripts.RWWrite)
)

// ReadWrite is the read-write lock (Client.ReadLock, Client.WriteLock); its
// scripts are rw_acquire.lua, rw_release.lua, rw_renew.lua and
// rw_keepalive.lua, whose headers give the protocol. A request's Field is
// its hold field, the owner field with the mode appended
// (scripts.RWField), so that the kernel keeps an owner's read and write
// holds apart, each with its own count, lease, token and renewal.
//
// Policy: readers share, a write hold excludes every other hold. Locally, a
// reader at the head of the queue waits while another owner of this client
// holds the write lock; a writer always tries, because a writer that must
// wait leaves a claim in Redis that makes other clients' new readers queue
// behind it (writer preference) and keeps that claim alive like a fair
// waiter's place (KeepAlive); readers keep nothing in Redis (Queues). The
// local queue prefers writers the same way: a writer goes ahead of the
// readers of this client that wait (Ahead), so that it never stands behind
// a reader that another client's claim holds back — the reader would wait
// for as long as other clients kept a writer waiting, and the writer with
// it. A read request of an owner that holds the write lock
// (write → read) is granted whatever waits, so it goes to the front of the
// queue (Jump) and no writer passes it; a write request of an owner that
// holds a read lock is refused by Redis with ErrWouldDeadlock.
var ReadWrite = &Kind{
	Name: "rw",
	HoldField: func(ownerField string, mode uint8) string {
		return scripts.RWField(scripts.RWMode(mode), ownerField)
	},
	Acquire: func(env Env, r *Request, expected int64) scripts.Call {
		claim := env.Cfg.WaiterTimeout
		if r.Wait == 0 {
			claim = 0 // a try-once writer leaves no claim behind
		}
		keys, args := scripts.RWAcquireCall(env.Name, r.Field, r.Lease, expected, claim)
		return scripts.Call{Script: scripts.RWAcquireScript, Keys: keys, Args: args}
	},
	// Only a writer's refused attempt leaves a place (its claim);
	// readers keep nothing in Redis while they wait.
	Queues:        func(r *Request) bool { return r.Mode == ModeWrite },
	DecodeAcquire: decodeRWAcquire,
	HoldToken:     true,
	Release: func(env Env, field string, expected int64) scripts.Call {
		keys, args := scripts.RWReleaseCall(env.Name, field, expected)
		return scripts.Call{Script: scripts.RWReleaseScript, Keys: keys, Args: args}
	},
	DecodeRelease: decodeInt,
	Renew:         scripts.RWRenewScript,
	KeepAlive:     scripts.RWKeepAliveScript,
	KeepAliveKey:  scripts.LockKey,
	Channel: func(name, _ string) string {
		return scripts.Channel(name)
	},
	MayAttempt:        rwMayAttempt,
	Jump:              rwJump,
	Ahead:             rwAhead,
	YieldAfterRelease: true,
}

// rwMayAttempt: a writer always tries (to claim its turn in Redis); a
// reader tries unless another owner of this client holds the write lock.
func rwMayAttempt(head *Request, holds func(yield func(Hold) bool)) bool {
	if head.Mode == ModeWrite {
		return true
	}
	_, me, _ := scripts.RWModeOf(head.Field)
	ok := true
	for h := range holds {
		if m, o, _ := scripts.RWModeOf(h.Field); m == scripts.RWWrite && o != me {
			ok = false
			break
		}
	}
	return ok
}

// rwJump: a read request of an owner holding the write lock goes first.
// A write grant being given back (Undo) holds nothing for the owner: its
// reader waits its turn like any other.
func rwJump(r *Request, holds func(yield func(Hold) bool)) bool {
	if r.Mode != ModeRead {
		return false
	}
	_, me, _ := scripts.RWModeOf(r.Field)
	for h := range holds {
		if m, o, _ := scripts.RWModeOf(h.Field); m == scripts.RWWrite && o == me && !h.Undo {
			return true
		}
	}
	return false
}

// rwAhead: a writer passes a waiting reader, unless the reader's owner
// holds the write lock (it is granted whatever waits, see rwJump).
func rwAhead(r, q *Request, holds func(yield func(Hold) bool)) bool {
	return r.Mode == ModeWrite && q.Mode == ModeRead && !rwJump(q, holds)
}

// decodeRWAcquire decodes rw_acquire.lua's reply: acquire.lua's codes, plus
// RWWouldDeadlock.
func decodeRWAcquire(vals []int64) (AcquireResult, error) {
	if len(vals) == 1 && vals[0] == scripts.RWWouldDeadlock {
		return AcquireResult{Code: Refused, Err: ErrWouldDeadlock}, nil
	}
	return DecodeAcquire(vals)
}
