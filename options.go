package holdfast

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// An Option changes one Lock call.
type Option func(*lockOptions)

type lockOptions struct {
	lease time.Duration // 0: the watchdog with Config.WatchdogTimeout
	wait  time.Duration // < 0: wait until granted or ctx ends
	err   error
}

// applyOptions returns the options opts set. A call with none (the common
// case) allocates nothing: the options are built on the heap only when an
// Option has to be given their address.
func applyOptions(opts []Option) lockOptions {
	if len(opts) == 0 {
		return lockOptions{wait: -1}
	}
	o := &lockOptions{wait: -1}
	for _, opt := range opts {
		opt(o)
	}
	return *o
}

// WithLease holds the lock for a fixed lease d with no watchdog (Redisson's
// leaseTime): Lost closes with ErrLeaseExpired at the validity deadline,
// sent + d - (d/100 + 2ms), unless Release came first. d must be at least
// MinLease and at most MaxLease.
func WithLease(d time.Duration) Option {
	return func(o *lockOptions) {
		if err := checkLease("lease", d); err != nil {
			o.err = err
			return
		}
		o.lease = d
	}
}

// WithWait gives up after d if the lock has not been granted (Redisson's
// waitTime): Lost closes with ErrWaitTimeout. WithWait(0) tries once and gives
// up at once if the lock is held: one round of calls, then the answer, on
// every kind and composite (Lock, FairLock, ReadLock, WriteLock, Semaphore, LockAll,
// RedLock) — no retry timer and no round wait, so it ends within one call's
// round trip, or CallTimeout when Redis does not answer (a failed call is
// the answer: ErrWaitTimeout wrapping the call's error). Without WithWait a
// Lock waits until it is granted or its context ends. A d too long to reach
// (up to math.MaxInt64) waits for ever, like no WithWait.
func WithWait(d time.Duration) Option {
	return func(o *lockOptions) {
		if d < 0 {
			o.err = fmt.Errorf("%w: negative wait %v", ErrInvalidOption, d)
			return
		}
		o.wait = d
	}
}

// MinLease is the shortest lease accepted by WithLease and
// Config.WatchdogTimeout: shorter leases leave too little of the lease once
// drift and timer granularity are taken off.
const MinLease = 50 * time.Millisecond

// MaxLease is the longest lease accepted by WithLease and
// Config.WatchdogTimeout. A lock that must outlive it wants the watchdog;
// the bound keeps every deadline a representable time (Deadline counts
// nanoseconds from 1970, which run out in 2262).
const MaxLease = 365 * 24 * time.Hour

// checkLease reports a lease outside [MinLease, MaxLease], naming it what.
func checkLease(what string, d time.Duration) error {
	switch {
	case d < MinLease:
		return fmt.Errorf("%w: %s %v is shorter than %v", ErrInvalidOption, what, d, MinLease)
	case d > MaxLease:
		return fmt.Errorf("%w: %s %v is longer than %v", ErrInvalidOption, what, d, MaxLease)
	}
	return nil
}

// maxOwnerLen bounds owner ids: the owner is part of every hash field.
const maxOwnerLen = 256

type ownerKey struct{}

// WithOwner returns a context whose Locks belong to owner. Two Lock calls with
// the same owner on the same name of one Client nest (reentry): the second is
// granted while the first holds, and each needs its own Release. Without an
// owner every Lock call is its own owner. owner must be non-empty, at most
// 256 bytes, and must not start with '~' (reserved for generated owners);
// otherwise the Lock ends with ErrInvalidOption.
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

func ownerFrom(ctx context.Context) (string, bool, error) {
	owner, ok := ctx.Value(ownerKey{}).(string)
	if !ok {
		return "", false, nil
	}
	switch {
	case owner == "":
		return "", true, fmt.Errorf("%w: empty owner", ErrInvalidOption)
	case len(owner) > maxOwnerLen:
		return "", true, fmt.Errorf("%w: owner longer than %d bytes", ErrInvalidOption, maxOwnerLen)
	case strings.HasPrefix(owner, "~"):
		return "", true, fmt.Errorf("%w: owner %q starts with '~', which is reserved", ErrInvalidOption, owner)
	}
	return owner, true, nil
}

// anonymousField is scripts.Field(clientID, instance, "~N") for the N-th
// Lock call without an owner, built in one allocation instead of three.
func anonymousField(clientID, instance string, n uint64) string {
	var num [20]byte
	digits := strconv.AppendUint(num[:0], n, 10)
	var b strings.Builder
	b.Grow(len(clientID) + len(instance) + 3 + len(digits))
	b.WriteString(clientID)
	b.WriteByte(':')
	b.WriteString(instance)
	b.WriteString(":~")
	b.Write(digits)
	return b.String()
}
