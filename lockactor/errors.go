package lockactor

import (
	"errors"

	"github.com/holdfast/holdfast/scripts"
)

// The causes a request ends with. Package holdfast exports the same values
// (holdfast.ErrReleased == lockactor.ErrReleased), so errors.Is works across.
var (
	ErrReleased      = errors.New("holdfast: lock released")
	ErrWaitTimeout   = errors.New("holdfast: wait budget spent before the lock was granted")
	ErrLeaseExpired  = errors.New("holdfast: lease expired before it could be renewed")
	ErrNotOwner      = errors.New("holdfast: Redis no longer shows this owner holding the lock")
	ErrClosed        = errors.New("holdfast: client closed")
	ErrInvalidName   = scripts.ErrInvalidName
	ErrInvalidOption = errors.New("holdfast: invalid option")
	ErrNotHeld       = errors.New("holdfast: lock not held")
	ErrFailover      = errors.New("holdfast: the Redis node holding the lock was demoted to a replica (failover); the promoted replica may grant the lock to others")
	// ErrRedis wraps a Redis error reply that retrying cannot fix (NOPERM,
	// unknown command, WRONGTYPE, a script error, NOAUTH): the request ends
	// at once with it, the server's text following.
	ErrRedis = errors.New("holdfast: Redis refused the call")
	// ErrReplicaSync: too few replicas acknowledged a grant (Config.SyncReplicas).
	ErrReplicaSync = errors.New("holdfast: too few replicas acknowledged the write in time")
	// ErrWrongKind: the name is held or queued as another kind of lock
	// (Lock, FairLock, ReadLock/WriteLock, Semaphore share one name space).
	ErrWrongKind = errors.New("holdfast: lock name in use as another kind of lock")
	// ErrWouldDeadlock: an owner holding a read lock asked for the write
	// lock of the same name, which would wait for its own read hold.
	ErrWouldDeadlock = errors.New("holdfast: write lock asked by an owner that holds the read lock (it would wait for itself)")
	// ErrPermits: the name is in use as a semaphore of another permit count.
	ErrPermits = errors.New("holdfast: semaphore in use with another permit count")
)
