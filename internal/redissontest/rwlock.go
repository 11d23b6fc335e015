package redissontest

import "context"

var readKind = &kind{
	object:  "read",
	channel: RWLockChannel,
	try: func(ctx context.Context, c *Client, name string, thread, lease int64) (bool, int64, int64, error) {
		return c.evalTTL(ctx, readAcquireLua, []string{name, ReadTimeoutPrefix(name, c.id, thread)},
			itoa(lease), LockField(c.id, thread), WriteField(c.id, thread))
	},
	unlock: func(ctx context.Context, c *Client, name string, thread int64, latch string) (bool, bool, error) {
		return c.evalUnlock(ctx, readUnlockLua,
			[]string{name, RWLockChannel(name), ReadTimeoutPrefix(name, c.id, thread), ReadKeyPrefix(name), latch},
			itoa(UnlockMessage), LockField(c.id, thread), c.publishCommand(), itoa(c.latchMs))
	},
	renew: func(c *Client, name string, thread int64) {
		c.reads.add(name, thread, LockField(c.id, thread), ReadKeyPrefix(name))
	},
	// RedissonReadLock.cancelExpirationRenewal calls RedissonLock's first,
	// which cancels the thread in the LockTask entry of the same name (the
	// write lock's, if the thread also writes), then the ReadLockTask's.
	cancel: func(c *Client, name string, thread *int64) {
		c.locks.cancel(name, thread)
		c.reads.cancel(name, thread)
	},
}

var writeKind = &kind{
	object:  "write",
	channel: RWLockChannel,
	try: func(ctx context.Context, c *Client, name string, thread, lease int64) (bool, int64, int64, error) {
		return c.evalTTL(ctx, writeAcquireLua, []string{name}, itoa(lease), WriteField(c.id, thread))
	},
	unlock: func(ctx context.Context, c *Client, name string, thread int64, latch string) (bool, bool, error) {
		return c.evalUnlock(ctx, writeUnlockLua, []string{name, RWLockChannel(name), latch},
			itoa(ReadUnlockMessage), itoa(c.internalLease("write", name)), WriteField(c.id, thread),
			c.publishCommand(), itoa(c.latchMs))
	},
	renew:  func(c *Client, name string, thread int64) { c.locks.add(name, thread, WriteField(c.id, thread), "") },
	cancel: func(c *Client, name string, thread *int64) { c.locks.cancel(name, thread) },
}

// ReadLock is RReadWriteLock.readLock().lock(leaseMs, MILLISECONDS);
// leaseMs <= 0 takes it under the watchdog (ReadLockTask).
func (c *Client) ReadLock(ctx context.Context, name string, thread, leaseMs int64) error {
	_, _, err := c.acquire(ctx, readKind, name, thread, true, 0, leaseMs)
	return err
}

// TryReadLock is readLock().tryLock(waitMs, leaseMs, MILLISECONDS).
func (c *Client) TryReadLock(ctx context.Context, name string, thread, waitMs, leaseMs int64) (bool, error) {
	ok, _, err := c.acquire(ctx, readKind, name, thread, false, waitMs, leaseMs)
	return ok, err
}

// ReadUnlock is readLock().unlock() for thread.
func (c *Client) ReadUnlock(ctx context.Context, name string, thread int64) error {
	return c.release(ctx, readKind, name, thread)
}

// WriteLock is RReadWriteLock.writeLock().lock(leaseMs, MILLISECONDS);
// leaseMs <= 0 takes it under the watchdog (LockTask, field ID:THREAD:write).
func (c *Client) WriteLock(ctx context.Context, name string, thread, leaseMs int64) error {
	_, _, err := c.acquire(ctx, writeKind, name, thread, true, 0, leaseMs)
	return err
}

// TryWriteLock is writeLock().tryLock(waitMs, leaseMs, MILLISECONDS).
func (c *Client) TryWriteLock(ctx context.Context, name string, thread, waitMs, leaseMs int64) (bool, error) {
	ok, _, err := c.acquire(ctx, writeKind, name, thread, false, waitMs, leaseMs)
	return ok, err
}

// WriteUnlock is writeLock().unlock() for thread.
func (c *Client) WriteUnlock(ctx context.Context, name string, thread int64) error {
	return c.release(ctx, writeKind, name, thread)
}

// ForceReadUnlock is readLock().forceUnlock(): when the mode is read,
// delete the hash and publish UnlockMessage on the rwlock channel.
func (c *Client) ForceReadUnlock(ctx context.Context, name string) (bool, error) {
	readKind.cancel(c, name, nil)
	c.setInternalLease("read", name, c.watchdogMs())
	n, err := forceModeUnlockLua.Exec(ctx, c.rdb, []string{name, RWLockChannel(name)},
		[]string{itoa(UnlockMessage), c.publishCommand(), ModeRead}).AsInt64()
	return n == 1, err
}

// ForceWriteUnlock is writeLock().forceUnlock(): when the mode is write,
// delete the hash and publish ReadUnlockMessage on the rwlock channel.
func (c *Client) ForceWriteUnlock(ctx context.Context, name string) (bool, error) {
	writeKind.cancel(c, name, nil)
	c.setInternalLease("write", name, c.watchdogMs())
	n, err := forceModeUnlockLua.Exec(ctx, c.rdb, []string{name, RWLockChannel(name)},
		[]string{itoa(ReadUnlockMessage), c.publishCommand(), ModeWrite}).AsInt64()
	return n == 1, err
}

// IsReadLocked is readLock().isLocked(): mode read, or mode write with a
// reader besides the writer.
func (c *Client) IsReadLocked(ctx context.Context, name string) (bool, error) {
	n, err := readLockedLua.Exec(ctx, c.rdb, []string{name}, nil).AsInt64()
	return n == 1, err
}

// IsWriteLocked is writeLock().isLocked(): HGET name mode == "write".
func (c *Client) IsWriteLocked(ctx context.Context, name string) (bool, error) {
	m, err := c.rdb.Do(ctx, c.rdb.B().Hget().Key(name).Field(ModeField).Build()).ToString()
	if err != nil {
		if isNil(err) {
			return false, nil
		}
		return false, err
	}
	return m == ModeWrite, nil
}

// ReadHoldCount is the read hold count of thread: HGET name ID:THREAD.
func (c *Client) ReadHoldCount(ctx context.Context, name string, thread int64) (int64, error) {
	return c.HoldCount(ctx, name, thread)
}

// WriteHoldCount is the write hold count of thread: HGET name ID:THREAD:write.
func (c *Client) WriteHoldCount(ctx context.Context, name string, thread int64) (int64, error) {
	n, err := c.rdb.Do(ctx, c.rdb.B().Hget().Key(name).Field(WriteField(c.id, thread)).Build()).AsInt64()
	if isNil(err) {
		return 0, nil
	}
	return n, err
}
