// Package holdfast is a family of distributed locks for Go on Redis, renewed
// by a watchdog while their holder lives, woken by pub/sub instead of
// polling, fenced by a token on every grant, and honest about loss.
//
// Choose a kind; every one returns the same *Lock, with Acquired and Lost
// channels, Wait, Release, Token and Deadline:
//
//	Client.Lock        one holder at a time; the same owner may lock again (reentrant)
//	Client.FairLock    as Lock, granted in arrival order across processes
//	Client.ReadLock    shared with other readers, excludes writers
//	Client.WriteLock   exclusive; readers cannot starve a waiting writer
//	Client.Semaphore   at most N holders, each permit with its own lease and token
//	LockAll            several names on one or several Clients, all or nothing
//	RedLock            a majority of independent Redis deployments
//	Client.Elect       one leader at a time, its term a fencing token (Client.Leader
//	                   and Client.Observe tell who leads)
//
// Acquire and release are one Redis call each (one per part or node for
// LockAll and RedLock); the watchdog renews every WatchdogTimeout/3, up to
// 100 holds per call. Waiters of a name in one process share one
// subscription and one attempt in flight.
//
// # The context bounds the hold, WithWait bounds the wait
//
// The ctx given to Lock (and to every kind) bounds the whole life of the
// Lock, not only the wait: when it ends, a pending Lock gives up and a held
// one is released. So do not bound the wait with context.WithTimeout: the
// hold would end in the middle of the work. Give Lock the context of the work
// (context.WithoutCancel for work that outlives its request) and bound the
// wait with WithWait; WithWait(0) tries once. The ctx of Lock.Wait and
// Lock.Release bounds only that call.
//
//	c, err := holdfast.Open("redis://127.0.0.1:6379", holdfast.Config{})
//	if err != nil {
//		return err
//	}
//	defer c.Close() // closes the Redis client Open dialled too
//
//	l := c.Lock(ctx, "orders:42", holdfast.WithWait(10*time.Second)) // returns at once
//	select {
//	case <-l.Acquired: // held; l.Token() is the fencing token
//	case <-l.Lost: // over before it was granted; l.Err() says why
//		return l.Err()
//	}
//	// ... work, checking l.Lost and l.Deadline() before each write ...
//	return l.Release(ctx)
//
// Open takes the URLs of the holdfast command (an ACL user, TLS, Cluster
// seeds, Sentinels); New takes a rueidis.Client you configured yourself.
// With Config.Layout = LayoutRedisson, Lock, FairLock, ReadLock, WriteLock
// and Semaphore speak Redisson's keys and messages, so Go and Java
// processes share lock names.
// Package sim runs the same lock logic in a deterministic simulator, to test
// code that uses holdfast under failovers, partitions and pauses.
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
