// Package redissontest is the "Java side" of holdfast's Redisson layout
// tests: a Go client that speaks Redisson's lock protocol (RLock,
// RFencedLock, RReadWriteLock) against a real Redis, with the same keys,
// hash fields, scripts' effects, replies, pub/sub messages, waits and
// watchdog renewals as Redisson. Its Lua is its own, written from the
// facts below; nothing is copied from Redisson.
//
// # Source read
//
// redisson/redisson master at commit 66863978b4a92093b97c1f8c96f182a77e81d50e
// (2026-08-21, pom version 4.7.1-SNAPSHOT), module redisson,
// package org.redisson. The lock scripts (acquire, unlock, forceUnlock,
// fenced, read, write) and LockTask's renewal script are the same at tag
// redisson-3.52.0 (3d8945a7, 2025-09-25), the last 3.x release; only
// ReadLockTask's renewal differs there (see "Watchdog" below). Class and
// method names below are Redisson's.
//
// # Names (RedissonObject.prefixName / suffixName, the "brace rule")
//
//	prefixName(p, NAME) = p + ":" + NAME         if NAME contains "{"
//	                    = p + ":{" + NAME + "}"  otherwise
//	suffixName(NAME, s) = NAME + ":" + s         if NAME contains "{"
//	                    = "{" + NAME + "}:" + s  otherwise
//
// The rule only looks for a "{" anywhere in NAME. Its purpose is that every
// key and channel of a lock hashes to NAME's cluster slot. With NAME the
// lock's raw name (getRawName, the name as given):
//
//   - lock hash key: NAME itself (RLock, RFencedLock, and the one hash of an
//     RReadWriteLock shared by its read and write locks);
//   - RLock/RFencedLock channel: prefixName("redisson_lock__channel", NAME),
//     e.g. redisson_lock__channel:{NAME} (RedissonLock.getChannelName; two
//     underscores);
//   - RReadWriteLock channel, for both its locks:
//     prefixName("redisson_rwlock", NAME) = redisson_rwlock:{NAME}
//     (RedissonReadLock/RedissonWriteLock.getChannelName);
//   - fencing token counter: prefixName("redisson_lock_token", NAME) =
//     redisson_lock_token:{NAME}, a string key (RedissonFencedLock.tokenName);
//   - unlock latch: prefixName("redisson_unlock_latch", NAME) + ":" + REQ =
//     redisson_unlock_latch:{NAME}:REQ (RedissonBaseLock.getUnlockLatchName),
//     REQ = ServiceManager.generateId(), 16 random bytes as 32 hex digits,
//     fresh for each unlock call;
//   - reader timeout prefix: suffixName(NAME, ID:THREAD) + ":rwlock_timeout"
//     = {NAME}:ID:THREAD:rwlock_timeout, or NAME:ID:THREAD:rwlock_timeout when
//     NAME contains "{" (RedissonReadLock.getReadWriteTimeoutNamePrefix); the
//     n-th nested read hold of that thread has the key PREFIX + ":" + n,
//     n = 1, 2, ...;
//   - reader key prefix, KP: the timeout prefix cut before ":ID:THREAD"
//     (RedissonReadLock.getKeyPrefix, a String.split on ":" + ID:THREAD), i.e.
//     "{NAME}", or NAME when it contains "{". Scripts rebuild any reader
//     field F's n-th timeout key as KP + ":" + F + ":rwlock_timeout:" + n.
//
// Hash fields (RedissonBaseLock.getLockName): ID:THREAD, where ID is the
// ServiceManager's id, a UUID.randomUUID().toString() per Redisson
// instance, and THREAD the Java thread id in decimal. A write lock's field
// is ID:THREAD:write (RedissonWriteLock.getLockName). An RReadWriteLock hash
// also has the field "mode" = "read" or "write". Field values are hold
// counts (HINCRBY integers).
//
// Messages (LockPubSub): UNLOCK_MESSAGE = 0, READ_UNLOCK_MESSAGE = 1,
// published as the integer's decimal text. The publish command is a script
// argument: PUBLISH, or SPUBLISH when the Redisson instance uses sharded
// pub/sub (PublishSubscribeService.getPublishCommand; sharding is detected
// only in cluster mode, ClusterServersConfig.shardedSubscriptionMode AUTO,
// by PUBSUB SHARDNUMSUB answering). Channels are always passed as KEYS.
//
// Defaults (Config): lockWatchdogTimeout 30000 ms; lockWatchdogBatchSize
// 100; useScriptCache true (scripts go as EVALSHA, EVAL on NOSCRIPT). The
// unlock latch PX is max(1, (timeout + retryDelay.calcDelay(retryAttempts))
// * retryAttempts) with BaseConfig defaults timeout 3000, retryAttempts 4,
// retryDelay EqualJitterDelay(1 s, 2 s), whose delay at attempt 4 is
// 1000..2000 ms: so 16000..20000 ms, random per unlock
// (RedissonBaseLock.unlockInnerAsync(threadId, requestId)).
//
// Against a master with replicas (not in single-server mode) the lock
// scripts go through syncedEval: batched with WAIT (and WAITAOF) for the
// replicas, slavesSyncTimeout 1000 ms; when the replicas do not confirm,
// tryAcquire runs the unlock script to undo the grant (handleNoSync).
//
// # RLock (RedissonLock, RedissonBaseLock)
//
// internalLockLeaseTime is a field of each RLock object: lockWatchdogTimeout
// at creation; set to leaseTime after a grant with leaseTime > 0; set back to
// lockWatchdogTimeout by cancelExpirationRenewal when an unlock answered nil
// or 1 or failed, and by forceUnlock. It is the lease of a grant without
// leaseTime (so a watchdog grant after a leased grant on the same object
// gets that lease) and ARGV[2] of unlock.
//
// Acquire (tryLockInnerAsync), EVAL_LONG:
//
//	KEYS[1] NAME
//	ARGV[1] lease ms: leaseTime if > 0, else internalLockLeaseTime
//	ARGV[2] ID:THREAD
//	if NAME does not exist, or has field ARGV[2]:
//	    HINCRBY NAME ARGV[2] 1; PEXPIRE NAME ARGV[1]; reply nil  (granted)
//	else reply PTTL NAME                                        (refused)
//
// A reentrant grant increments the count and resets the PTTL to ARGV[1]
// (not additive). After a grant (tryAcquireAsync): leaseTime > 0 sets
// internalLockLeaseTime; otherwise (leaseTime <= 0, -1 in the API) the
// watchdog is scheduled, once per grant, reentrant ones included.
//
// tryLock() with no arguments is one acquire (EVAL_NULL_BOOLEAN, nil =
// true) with internalLockLeaseTime and the watchdog.
//
// Unlock (unlockInnerAsync), EVAL_BOOLEAN:
//
//	KEYS[1] NAME, KEYS[2] redisson_lock__channel:{NAME},
//	KEYS[3] redisson_unlock_latch:{NAME}:REQ
//	ARGV[1] 0, ARGV[2] internalLockLeaseTime, ARGV[3] ID:THREAD,
//	ARGV[4] PUBLISH|SPUBLISH, ARGV[5] latch PX
//	if KEYS[3] exists: reply tonumber(its value)       (a retried request)
//	if NAME has no field ARGV[3]: reply nil
//	n = HINCRBY NAME ARGV[3] -1
//	if n > 0: PEXPIRE NAME ARGV[2]; SET KEYS[3] 0 PX ARGV[5]; reply 0
//	else:     DEL NAME; ARGV[4] KEYS[2] 0; SET KEYS[3] 1 PX ARGV[5]; reply 1
//
// Then the client DELs KEYS[3] (fire and forget) and, whatever the reply
// or error, cancels the watchdog for THREAD once (cancelExpirationRenewal).
// nil becomes IllegalMonitorStateException("attempt to unlock lock, not
// locked by current thread by node id: ID thread-id: THREAD"); 0 and 1 are
// success. Unlock takes no lease argument from the caller; the remaining
// hold's PTTL becomes internalLockLeaseTime.
//
// forceUnlock (forceUnlockAsync), EVAL_BOOLEAN, first cancels this
// instance's watchdog for NAME for all threads:
//
//	KEYS[1] NAME, KEYS[2] channel; ARGV[1] 0, ARGV[2] PUBLISH|SPUBLISH
//	if DEL NAME == 1: ARGV[2] KEYS[2] 0; reply 1   else reply 0
//
// isLocked: EXISTS NAME. isHeldByThread: HEXISTS NAME ID:THREAD.
// getHoldCount: HGET NAME ID:THREAD, 0 when absent. delete(): forceUnlock.
//
// # Waiting (RedissonLock.lock, tryLock; LockPubSub; RedissonLockEntry)
//
// lock(leaseTime): acquire; nil: done. Else subscribe to the channel and
// wait for Redis's subscribe confirmation; then loop: acquire; nil: done
// (unsubscribe); else if ttl >= 0 wait on the entry's latch at most ttl ms,
// else wait on the latch with no limit; repeat. The waiter learns the
// holder's remaining TTL only from the acquire script's PTTL reply, and so
// retries at the latest when that TTL ends even if no message comes.
//
// tryLock(waitTime, leaseTime): time = waitTime; acquire; nil: true.
// Subtract the elapsed time; <= 0: false. Subscribe, waiting at most time
// (a timeout: false). Subtract; <= 0: false. Loop: acquire; nil: true;
// subtract; <= 0: false; wait on the latch for ttl if 0 <= ttl < time,
// else for time; subtract; <= 0: false. Always unsubscribe at the end. A
// negative waitTime makes one attempt.
//
// A Redisson instance has one subscription entry (RedissonLockEntry) per
// lock, keyed by ID + ":" + NAME, shared and reference-counted by all its
// waiting threads; the last one out unsubscribes. Its latch is a
// java.util.concurrent.Semaphore with 0 permits. Messages are decoded as
// integers, others are ignored (LockPubSub.onMessage):
//
//   - 0 (UNLOCK_MESSAGE): release one permit: wakes one waiting thread, or,
//     if none waits, leaves the permit for the next wait, which then
//     returns at once and retries;
//   - 1 (READ_UNLOCK_MESSAGE): release as many permits as threads are
//     waiting now: wakes them all, leaves nothing.
//
// Who publishes what, where:
//
//   - RLock/RFencedLock unlock that deletes the hash, forceUnlock that
//     deleted it: 0 on redisson_lock__channel:{NAME};
//   - read unlock that deletes the hash, read unlock that finds no "mode",
//     read forceUnlock: 0 on redisson_rwlock:{NAME};
//   - write unlock that deletes the hash, write unlock that finds no
//     "mode", write forceUnlock: 1 on redisson_rwlock:{NAME};
//   - nothing for a decrement that leaves a hold, for a write unlock that
//     leaves readers (downgrade to "read"), nor for lease expiry.
//
// # RFencedLock (RedissonFencedLock)
//
// Same hash, fields, channel, unlock, forceUnlock and watchdog as RLock,
// plus the counter redisson_lock_token:{NAME}.
//
// lockAndGetToken / tryLockAndGetToken (tryLockInnerAsync(leaseTime, unit,
// threadId)), EVAL_LONG_LIST:
//
//	KEYS[1] NAME, KEYS[2] redisson_lock_token:{NAME}
//	ARGV[1] lease ms, ARGV[2] ID:THREAD
//	if NAME does not exist, or has field ARGV[2]:
//	    t = INCR KEYS[2]; HINCRBY NAME ARGV[2] 1; PEXPIRE NAME ARGV[1];
//	    reply {-1, t}
//	else reply {PTTL NAME, -1}
//
// Every grant, reentrant ones included, INCRs the counter and returns the
// new value: the first grant ever gets 1, a reentry gets a larger token
// than the hold it reenters. The counter has no TTL; unlock and forceUnlock
// never touch it; delete() deletes NAME and the counter. getToken: GET the
// counter (null when absent). A refused tryLockAndGetToken returns null.
// First element -1 means granted, so a NAME without TTL (PTTL -1) would be
// taken as a grant with token -1. Wait loop as tryLock, except that a
// negative waitTime waits forever; lockAndGetToken() and the no-argument
// tryLockAndGetToken() both wait forever; the synchronous
// lockAndGetToken(leaseTime, unit) drops leaseTime (calls
// lockAndGetTokenAsync()) and so takes the lock under the watchdog.
//
// lock()/tryLock() of an RFencedLock (its override of
// tryLockInnerAsync(waitTime, ...)): same KEYS/ARGV, on grant INCR KEYS[2]
// then HINCRBY, PEXPIRE, reply nil; else reply PTTL. The token is consumed
// but not returned.
//
// # RReadWriteLock (RedissonReadWriteLock, RedissonReadLock, RedissonWriteLock)
//
// One hash NAME with "mode" and holder fields: readers ID:THREAD = their
// read hold count, the writer ID:THREAD:write = its write hold count. Each
// read hold n of a reader also has the string key
// {NAME}:ID:THREAD:rwlock_timeout:n (value 1) with its own PTTL. Both locks
// use redisson_rwlock:{NAME} and the waiting above.
//
// Read acquire (RedissonReadLock.tryLockInnerAsync):
//
//	KEYS[1] NAME, KEYS[2] {NAME}:ID:THREAD:rwlock_timeout
//	ARGV[1] lease ms, ARGV[2] ID:THREAD, ARGV[3] ID:THREAD:write
//	mode = HGET NAME mode
//	no mode: HSET NAME mode read; HSET NAME ARGV[2] 1;
//	         SET KEYS[2]:1 1; PEXPIRE KEYS[2]:1 ARGV[1];
//	         PEXPIRE NAME ARGV[1]; reply nil
//	mode read, or mode write and HEXISTS NAME ARGV[3] (the writer itself):
//	         n = HINCRBY NAME ARGV[2] 1; SET KEYS[2]:n 1;
//	         PEXPIRE KEYS[2]:n ARGV[1];
//	         PEXPIRE NAME max(PTTL NAME, ARGV[1]); reply nil
//	else reply PTTL NAME
//
// Readers share; a writer's own thread may also read; another thread or
// instance may not read while "mode" is write. A reader cannot upgrade.
//
// Read unlock (RedissonReadLock.unlockInnerAsync), EVAL_BOOLEAN:
//
//	KEYS[1] NAME, KEYS[2] redisson_rwlock:{NAME},
//	KEYS[3] {NAME}:ID:THREAD:rwlock_timeout, KEYS[4] KP ({NAME}),
//	KEYS[5] redisson_unlock_latch:{NAME}:REQ
//	ARGV[1] 0, ARGV[2] ID:THREAD, ARGV[3] PUBLISH|SPUBLISH, ARGV[4] latch PX
//	if KEYS[5] exists: reply tonumber(its value)
//	no mode: ARGV[3] KEYS[2] 0; SET KEYS[5] 1 PX ARGV[4]; reply nil
//	no field ARGV[2]: reply nil
//	n = HINCRBY NAME ARGV[2] -1; if n == 0: HDEL NAME ARGV[2]
//	DEL KEYS[3]:(n+1)
//	if HLEN NAME > 1:
//	    m = max(-3, PTTL of KP:F:rwlock_timeout:i for every field F whose
//	            value is a number, i = 1..value)   (includes the writer
//	            field, whose keys do not exist: -2)
//	    if m > 0: PEXPIRE NAME m; SET KEYS[5] 0 PX ARGV[4]; reply 0
//	    if mode == write: SET KEYS[5] 0 PX ARGV[4]; reply 0
//	DEL NAME; ARGV[3] KEYS[2] 0; SET KEYS[5] 1 PX ARGV[4]; reply 1
//
// So the hash lives as long as its longest-lived reader timeout key; a
// reader whose timeout key expired (its holder stopped renewing) still has
// its field but no longer keeps the hash, and when no timeout key is left
// alive, the next read unlock deletes the hash. Then the client DELs the
// latch; nil is IllegalMonitorStateException as for RLock.
//
// Write acquire (RedissonWriteLock.tryLockInnerAsync):
//
//	KEYS[1] NAME; ARGV[1] lease ms, ARGV[2] ID:THREAD:write
//	no mode: HSET NAME mode write; HSET NAME ARGV[2] 1;
//	         PEXPIRE NAME ARGV[1]; reply nil
//	mode write and HEXISTS NAME ARGV[2]:
//	         HINCRBY NAME ARGV[2] 1; PEXPIRE NAME (PTTL NAME + ARGV[1]);
//	         reply nil          (reentry ADDS the lease to the PTTL)
//	else reply PTTL NAME
//
// Write unlock (RedissonWriteLock.unlockInnerAsync), EVAL_BOOLEAN:
//
//	KEYS[1] NAME, KEYS[2] redisson_rwlock:{NAME},
//	KEYS[3] redisson_unlock_latch:{NAME}:REQ
//	ARGV[1] 1, ARGV[2] internalLockLeaseTime, ARGV[3] ID:THREAD:write,
//	ARGV[4] PUBLISH|SPUBLISH, ARGV[5] latch PX
//	if KEYS[3] exists: reply tonumber(its value)
//	no mode: ARGV[4] KEYS[2] 1; SET KEYS[3] 1 PX ARGV[5]; reply nil
//	mode write and field ARGV[3] present:
//	    n = HINCRBY NAME ARGV[3] -1
//	    n > 0: PEXPIRE NAME ARGV[2]; SET KEYS[3] 0 PX ARGV[5]; reply 0
//	    else:  HDEL NAME ARGV[3];
//	           if HLEN NAME == 1: DEL NAME; ARGV[4] KEYS[2] 1
//	           else: HSET NAME mode read   (the writer's own reads remain;
//	                 no message, PTTL unchanged)
//	           SET KEYS[3] 1 PX ARGV[5]; reply 1
//	otherwise (mode read, or field absent): reply nil
//
// forceUnlock, read lock: if HGET NAME mode == "read": DEL NAME; publish 0
// on the rwlock channel; reply 1; else 0. Write lock: the same with "write"
// and message 1. KEYS[1] NAME, KEYS[2] channel, ARGV[1] message, ARGV[2]
// publish command. Neither deletes reader timeout keys. Each first cancels
// the instance's watchdog for NAME (the read lock: both LockTask and
// ReadLockTask).
//
// isLocked, read lock: mode == "read", or mode == "write" and HLEN NAME > 2
// (a reader besides the writer). Write lock: HGET NAME mode == "write".
//
// # Watchdog (renewal.LockRenewalScheduler, RenewalTask, LockTask, ReadLockTask)
//
// A grant without leaseTime registers (NAME, THREAD, field) with the
// instance's LockTask (RLock, RFencedLock, write lock; field ID:THREAD or
// ID:THREAD:write) or ReadLockTask (read lock; field ID:THREAD and KP).
// Entries are keyed by NAME and count grants per thread; each unlock call
// (whatever its reply) and each renewal failure removes one grant of the
// thread; a thread with no grant left leaves the entry, an entry with no
// thread is removed; forceUnlock removes the NAME entry. A read unlock or
// read forceUnlock also does this on the LockTask (RedissonReadLock's
// cancelExpirationRenewal calls RedissonLock's first), so a thread holding
// the write lock under the watchdog loses one write grant there.
//
// Each task is one timer chain per Redisson instance: started when its
// first entry is added, it runs every lockWatchdogTimeout/3 (10 s by
// default; the first run lockWatchdogTimeout/3 after the start, the next
// one lockWatchdogTimeout/3 after the previous run completed), renews every
// registered NAME, and stops when no entry is left. An error is logged and
// the chain goes on. NAMEs go in EVALs of at most lockWatchdogBatchSize;
// in cluster mode grouped by slot. The lease set is the config's
// lockWatchdogTimeout, not the object's internalLockLeaseTime.
//
// LockTask script:
//
//	KEYS[1..k] NAMEs; ARGV[1] lockWatchdogTimeout, ARGV[i+1] the field of
//	the entry's first thread (first registered, still holding)
//	for each i: if HEXISTS KEYS[i] ARGV[i+1]: PEXPIRE KEYS[i] ARGV[1]; 1
//	            else 0
//	reply the array of 1/0
//
// A 0 removes one grant of that first thread (renewal stops once it has
// none). Only one thread per NAME is checked; PEXPIRE renews the whole
// hash.
//
// ReadLockTask script (Redisson 4.4.0 and later; this package does this):
//
//	KEYS in pairs: KEYS[2j-1] NAME, KEYS[2j] KP
//	ARGV[1] lockWatchdogTimeout, then per pair: c, then the c fields
//	ID:THREAD of every thread of this instance registered for NAME
//	for each pair: for each listed field F present in NAME with count h:
//	    PEXPIRE KP:F:rwlock_timeout:i ARGV[1] for i = h..1
//	  if any listed field was present: PEXPIRE NAME ARGV[1]; 1   else 0
//
// A 0 removes one grant of each listed thread. An instance renews only its
// own readers' timeout keys. Up to 4.3.x, and in 3.x (3.52.0), the script
// got one field (the first thread's) per pair and, when it was present,
// PEXPIREd NAME and the timeout keys of EVERY numeric field of the hash,
// other instances' readers included; that loop reuses the name i for its
// inner counter, so it builds KEYS[i+1] from the hold index rather than
// the pair (wrong or nil key for a hold index >= 2 or a second pair).
//
// # This package
//
// Client (New(rdb, id)) is one Redisson instance with id ID; callers pass
// THREAD. Lock/TryLock/Unlock/ForceUnlock/IsLocked/IsHeldByThread/HoldCount
// are RLock; LockFenced/TryLockFenced/LockFencedNoToken/FencedToken are
// RFencedLock; ReadLock/WriteLock and friends are RReadWriteLock. Times are
// ms; leaseMs <= 0 means the watchdog (WithWatchdogTimeout sets
// lockWatchdogTimeout). It keeps one internalLockLeaseTime per lock kind
// and NAME (Redisson keeps one per RLock object), one subscription per
// channel on its own dedicated connection (Redisson: per ID:NAME, on shared
// pub/sub connections), and sends one renewal EVAL per NAME against a
// cluster. The unlock latch PX is DefaultUnlockLatchTimeoutMs (20000)
// unless set. Close stops every goroutine it started.
package redissontest
