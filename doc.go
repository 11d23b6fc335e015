// Package holdfast is a distributed lock for Go on Redis: reentrant, renewed
// by a watchdog while its holder lives, woken by pub/sub instead of polling,
// fenced by a token on every grant, and honest about loss.
//
//	c, err := holdfast.Open("redis://127.0.0.1:6379", holdfast.Config{})
//	if err != nil {
//		return err
//	}
//	defer c.Close() // closes the Redis client Open dialled too
//
//	l := c.Lock(ctx, "orders:42") // returns at once
//	select {
//	case <-l.Acquired: // held; l.Token() is the fencing token
//	case <-l.Lost: // over before it was granted; l.Err() says why
//		return l.Err()
//	}
//	defer l.Release(context.Background())
//
// Open takes the URLs of the holdfast command (an ACL user, TLS, Cluster
// seeds, Sentinels); New takes a rueidis.Client you configured yourself.
//
// The other kinds return the same *Lock: FairLock (first come, first
// served), ReadLock and WriteLock, Semaphore (at most N holders, each with
// a leased permit), Elect (leader election, whose terms are fencing tokens;
// Leader and Observe tell who leads), and the composites LockAll and
// RedLock. With
// Config.Layout = LayoutRedisson, Lock, ReadLock and WriteLock speak
// Redisson's keys and messages, so Go and Java processes share lock names.
//
// # Guarantees and their limits
//
// A hold is valid until its conservative deadline: the lease counted from the
// Client's clock before the request was sent, less lease/100+2ms of drift.
// If the watchdog cannot renew the hold by then, Lost closes at that deadline,
// before Redis can grant the key to anyone else. Fencing tokens strictly
// increase as long as Redis does not lose writes: a failover that drops the
// unreplicated tail, or a restart without persistence, can hand out a token
// again. A paused process cannot be stopped from acting after its deadline;
// only a resource that checks fencing tokens can reject it.
//
// # Concurrency
//
// Every lock name in use has one actor per Client that owns its state. Lock
// never blocks; the actor closes a Lock's Acquired and Lost channels, each
// exactly once. Close stops every goroutine the Client started.
package holdfast
