package holdfast

import (
	"errors"

	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/scripts"
)

// Errors. A Lock's Err() returns one of these, or wraps one, or wraps the
// context's error; test them with errors.Is.
var (
	// ErrReleased: the Lock ended because Release finished.
	ErrReleased = lockactor.ErrReleased
	// ErrWaitTimeout: WithWait's budget ran out before the lock was granted
	// (for WithWait(0): the lock was not free on the one try).
	ErrWaitTimeout = lockactor.ErrWaitTimeout
	// ErrLeaseExpired: the validity deadline passed without a successful
	// renewal — a fixed lease (WithLease) ran out, or Redis could not be
	// reached for longer than the lease. Lost closes at the deadline, before
	// Redis can let anyone else take the lock.
	ErrLeaseExpired = lockactor.ErrLeaseExpired
	// ErrNotOwner: Redis no longer shows this owner holding the lock (the
	// key was deleted, expired or taken over).
	ErrNotOwner = lockactor.ErrNotOwner
	// ErrClosed: the Client was closed (Lock after Close, or pending and held
	// Locks ended by Close).
	ErrClosed = lockactor.ErrClosed
	// ErrInvalidName: the lock name is empty, longer than 1024 bytes, or
	// starts with '}' (which would give its keys an empty cluster hash tag).
	ErrInvalidName = lockactor.ErrInvalidName
	// ErrInvalidValue: Elect with an empty value, or one longer than
	// MaxValueLen bytes.
	ErrInvalidValue = scripts.ErrInvalidValue
	// ErrInvalidOption: a bad option (non-positive lease, negative wait, empty
	// or reserved owner, nil context) or Config field.
	ErrInvalidOption = lockactor.ErrInvalidOption
	// ErrNotHeld: Release on a Lock that is already over. The error also
	// wraps the cause the Lock ended with.
	ErrNotHeld = lockactor.ErrNotHeld
	// ErrReleaseUnconfirmed: Release could not get Redis to confirm the
	// release within CallTimeout (the node is down, or silent): failed
	// tries are repeated within that bound, so a node that is back or a
	// failover that is over confirms it in time. Lock.Release
	// returns it wrapping the call's error; LockAll's Release, joined with
	// one error per part that did not confirm, naming it; RedLock's only
	// when so many nodes did not confirm that no majority is free for
	// another holder. The hold is over on this side all the same: Lost is
	// closed, renewal has stopped, Err wraps ErrReleased and this error.
	// The key runs out by its lease (until then nobody else can take the
	// name) and the release is repeated in the background until Redis
	// confirms it, the lease ends or the Client closes.
	ErrReleaseUnconfirmed = lockactor.ErrReleaseUnconfirmed
	// ErrFailover: a renewal was refused with READONLY — the Redis node this
	// Client writes to was demoted to a replica by a failover, and the
	// promoted replica may grant the lock to someone else. The hold ends at
	// once instead of at its deadline.
	ErrFailover = lockactor.ErrFailover
	// ErrRedis: Redis refused a call in a way that retrying cannot fix — an
	// ACL denial (NOPERM), an unknown command, WRONGTYPE on a lock key, a
	// script error, NOAUTH. The Lock ends at once; the error wraps the
	// server's reply. See the ACL rules in docs/operations.md.
	ErrRedis = lockactor.ErrRedis
	// ErrReplicaSync: with Config.SyncReplicas, fewer replicas than asked
	// acknowledged the grant within Config.SyncTimeout. The grant was undone
	// and the Lock never reported Acquired.
	ErrReplicaSync = lockactor.ErrReplicaSync
	// ErrWrongKind: the name is held or queued as another kind of lock.
	// Lock, FairLock, ReadLock/WriteLock, Semaphore and Elect share one name space; a name in
	// use as one kind refuses the others at once.
	ErrWrongKind = lockactor.ErrWrongKind
	// ErrNoQuorum: a RedLock could not get a majority of its nodes within
	// its wait budget (some nodes unreachable, or held elsewhere). The error
	// also wraps the last node's error.
	ErrNoQuorum = errors.New("holdfast: no majority of RedLock nodes granted the lock")
	// ErrWouldDeadlock: WriteLock by an owner that holds the ReadLock of the
	// same name, which would wait for itself. (Write → read is allowed.)
	ErrWouldDeadlock = lockactor.ErrWouldDeadlock
	// ErrNotSupported: a kind the Client's Layout cannot speak (FairLock
	// and Elect under LayoutRedisson); nothing changed.
	ErrNotSupported = errors.New("holdfast: lock kind not supported by the Client's layout")
	// ErrPermits: Semaphore with a permit count other than the one the
	// name's holders passed; nothing changed.
	ErrPermits = lockactor.ErrPermits
)
