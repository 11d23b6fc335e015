// Package lockactor is the lock state machine of holdfast: everything one
// client knows and decides about one lock name, as a pure function of time
// and inputs. It starts no goroutine, reads no clock and does no I/O:
// Machine.Step is given the time and one Msg (a Lock call, a cancellation,
// a script's reply, a timer, a wake-up) and answers with the Effects the
// runtime must carry out, in order. Package actor runs machines on
// protoactor-go and rueidis; package sim runs the same machines on a
// deterministic scheduler over simulated Redis nodes. It is holdfast's
// machinery, importable only because the module keeps its packages at the
// top level: it has no compatibility promise and may change in any release.
// Use package holdfast.
//
// # The kernel
//
// The Machine is one kernel shared by every kind of lock. It keeps:
//
//   - requests (one per Lock call) from arrival to Lost, with their wait
//     budgets, cancellations and Release calls;
//   - the local queue: pending requests in arrival order, but for those
//     the kind puts first (Ahead); only its head tries for the lock, one
//     attempt at a time, and a refused head sleeps until a wake-up on the
//     kind's channel or until the holder's TTL;
//   - owners: one per owner field (CLIENTID:INSTANCE:OWNER) with a hold in Redis,
//     its reentry count, token and validity deadline, and its one
//     operation slot (an owner changes its count in Redis one call at a
//     time, each call stating the count it expects, so every call can be
//     repeated after an ambiguous failure);
//   - timers (wait budget, retry, renewal, validity deadline, op retry,
//     waiter keep-alive), renewal on an absolute grid, backoff, and Lost
//     at the validity deadline, before Redis could grant the name to
//     anyone else (see Validity);
//   - undo: a grant that may have happened for a request that gave up is
//     released in the background.
//
// Every Redis operation leaves the machine as one EffCall carrying a
// scripts.Call (script, keys, arguments) and comes back as one MsgReply
// with the integer reply; renewals and waiter keep-alives leave as EffRenew
// for the watchdog's batches. A runtime therefore runs any script the same
// way, and a new script is wired in no runtime.
//
// The kernel's files follow a request's life, one chapter each: machine.go
// (the Machine, its state and Step), arrive.go (arrival and queueing),
// attempt.go (attempts and their replies), places.go (places in a queue
// kept by Redis, for kinds that have one), hold.go (owners, deadlines,
// renewal, loss), release.go (release, handoff and undo), timers.go
// (timers and shutdown) and dormant.go (a quiet hold asleep as a record).
//
// # Kinds
//
// What differs between kinds of lock is a Kind: a table of functions and
// flags in one short file per kind (kind_lock.go for the reentrant lock,
// kind_fair.go for the fair lock, …). A kind says which scripts its calls
// run and how their replies decode into the kernel's outcomes (Granted,
// Held, Mismatch, Refused), which local request may try while this client
// holds the name (MayAttempt: exclusive by default), whether it hands the
// lock between local requests in one call (Handoff), which batch script
// renews its holds, whether its waiters keep a place in a Redis queue
// (KeepAlive), which local requests go ahead of others (Ahead, Jump), and
// which channel wakes this client's waiters (Channel). No kernel function
// switches on the kind: adding a kind adds a file and touches no other
// kind's.
//
// A machine serves one kind at a time, the kind of its first request since
// it was idle; a request of another kind meanwhile ends with ErrWrongKind,
// as Redis would refuse it (the kinds share the name space, and each
// kind's fresh-grant script refuses a name in use as another).
//
// # The read-write lock: a writer's wait
//
// ReadWrite prefers writers, in Redis and in the local queue alike, and
// that bounds a writer's wait: a writer waits only while holds stand in
// its way — the holds of the name when it asked (read or write, of any
// client), and those of the writers that take a turn before it (this
// client's writers queued before it; other clients' writers, which race it
// for each turn: writers are not ordered across clients). No reader that
// waits holds it back. Another client's new readers wait behind its claim
// in Redis; this client's waiting readers wait behind it in the local
// queue, which it passes (Ahead) — all but a reader whose try was already
// on its way when the writer asked, or whose last try got no answer (it
// may hold in Redis, and learns that first), and a reader of an owner
// holding the write lock, which Redis grants whatever waits. A writer that
// stood behind a reader would wait for as long as other clients kept a
// writer waiting, since their claims hold that reader back. The
// property tests check this bound after every step (checkWriterWait).
//
// # Concurrency
//
// A Machine is not safe for concurrent use: its one owner is the actor (or
// simulated client) that steps it. The Handle methods a runtime calls for
// EffAcquired, EffDeadline, EffReleaseDone and EffLost run in effect
// order, and Lost is called exactly once per request.
package lockactor
