// Package scripts holds holdfast's Lua scripts and its Redis key layout: the one
// source of truth for production (run through rueidis) and for the simulator in
// package sim (run through an embedded Lua interpreter). The package is
// holdfast's machinery, importable only because the module keeps its packages
// at the top level: its Go API has no compatibility promise and may change in
// any release; use package holdfast. The Redis data layout it writes (keys,
// fields, channels, script semantics) is promised from v0.1.0 on: see
// docs/compatibility.md.
//
// # Key layout
//
// Every key and channel of a lock lies in the cluster hash slot of {NAME}, so
// one script may touch all of them on a Redis Cluster:
//
//	holdfast:{NAME}             string [w]COUNT:TOKEN:FIELD while the name is held (see Hold;
//	                            FIELD is CLIENTID:INSTANCE:OWNER, see Field), PEXPIRE = lease
//	holdfast:slot:{TAG}:fence   fencing counter of every name in the slot of NAME (TAG is
//	                            a short tag hashing to that slot), no TTL: FenceKey
//	holdfast:{NAME}:ch          pub/sub channel, told "released" when the lock becomes free
//	                            and someone waits (the hold's waiter mark "w", set by a
//	                            refused acquire)
//
// The fence counters are bounded: at most one per hash slot (16,384), however
// many names are ever locked.
//
// # Taking a fencing token
//
// Every script that grants a hold, reads a hold's token or raises a fence
// does it through the helpers of fence.lua, which this package puts in front
// of the script (WithFence): fence_take(slot) on a fresh grant, fence_peek
// for a hold already granted, fence_raise to lift a name's fence above a
// token seen elsewhere. No script touches a fence key any other way. Such a
// script's KEYS begin with GrantKeys(NAME, ...):
//
//	KEYS[1]  LockKey(NAME)
//	KEYS[2]  FenceKey(NAME)  the slot counter
//	KEYS[3…] the script's own keys (the fair queue, …)
//
// and it calls, e.g., token = fence_take(KEYS[2]). A new script is
// registered as NewScript("name", WithFence(body)).
//
// The reentrant lock's key is a string (acquire.lua has its layout). Kinds
// other than the reentrant lock add their own keys (see each kind's
// scripts) and keep a hash at the lock key marked with a field "kind"
// naming the kind; owner fields always contain ':', so the marker never
// collides with an owner. A fresh grant of one kind refuses a name whose key
// or fair queue says it is in use as another: the reentrant lock's scripts
// read the key with redis.pcall (a hash answers WRONGTYPE), the other kinds'
// read its "kind" field the same way (a string answers WRONGTYPE).
//
// The scripts' arguments and replies are documented at the top of each .lua
// file. A script is run as a Call: the script, its keys and its arguments;
// the runtimes (package actor over rueidis, package sim over its simulated
// nodes) run any Call the same way, so a new script is wired in no runtime.
package scripts

import (
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast/holdfast/internal/keyslot"
)

// Lua sources, embedded from the .lua files beside this file.
var (
	//go:embed release.lua
	Release string
	//go:embed renew.lua
	Renew string
	// HashRenew renews holds kept as a field of a hash: the fair lock's,
	// and the Redisson layout's.
	//go:embed hash_renew.lua
	HashRenew string

	//go:embed fence.lua
	fencePrelude string
	//go:embed acquire.lua
	acquireBody string
	//go:embed handoff.lua
	handoffBody string
	//go:embed fence_raise.lua
	fenceRaiseBody string
	// FenceRaise raises a name's fence to a floor; its KEYS are GrantKeys(NAME).
	FenceRaise = WithFence(fenceRaiseBody)

	//go:embed fair_common.lua
	fairCommon string
	//go:embed fair_acquire.lua
	fairAcquire string
	//go:embed fair_release.lua
	fairRelease string
	//go:embed fair_keepalive.lua
	fairKeepAlive string
)

// The granting scripts of the reentrant lock, with fence.lua in front.
var (
	Acquire = WithFence(acquireBody)
	Handoff = WithFence(handoffBody)
)

// WithFence returns the script body with fence.lua's helpers in front: the
// one way a script takes, reads or raises a fencing token.
func WithFence(body string) string { return fencePrelude + body }

// Script is one Lua script. Scripts are made once, at package
// initialisation, by NewScript; All lists them.
type Script struct {
	Name string // the .lua file's base name, for logs and errors
	Src  string
	// NoSync: the script only gives a hold up, so replica sync
	// (Config.SyncReplicas) need not wait for it. A release a failover
	// loses leaves a hold that ends with its lease, and any later synced
	// write carries it to the replicas, as replication keeps order.
	NoSync bool
	// HoldKey, for a batch script of the renewal shape, names the key whose
	// TTL bounds the hold the renewal of field on name extends (the read-
	// write lock's per-hold lease key); nil: the lock key itself.
	HoldKey func(name, field string) string
	// Batch says whether the script's calls are the watchdog's batches,
	// and what their items are: observers count and log such a call item
	// by item, whichever kind sent it.
	Batch Batch
	// KeyIsName: the script's first key (each key, for a batch) is the
	// lock name itself, as the Redisson layout keeps it, rather than a key
	// of holdfast's layout whose hash tag holds the name.
	KeyIsName bool
}

// Batch is the shape of a script's calls, for those who observe them.
type Batch uint8

const (
	// NoBatch: a call of one operation on one lock.
	NoBatch Batch = iota
	// RenewBatch: a batch of the renewal shape (see package renewal) whose
	// items are holds: KEYS[i] is the key of hold i, ARGV[2i-1] and
	// ARGV[2i] its owner field and lease in milliseconds, and the reply
	// has one integer per hold, 1 when renewed, 0 when not held.
	RenewBatch
	// KeepAliveBatch: a batch of the same shape whose items are waiters'
	// places in a queue kept by Redis; 1 when the place is kept.
	KeepAliveBatch
)

// LockName returns the lock name that key, one of the keys of a call of
// s, belongs to: the key itself for a script of the Redisson layout, what
// the hash tag of a key of holdfast's layout holds otherwise
// (holdfast:{NAME} or holdfast:{NAME}:suffix). Names may contain '}', so
// the tag ends at the last one.
func (s *Script) LockName(key string) string {
	if s.KeyIsName {
		return key
	}
	i, j := strings.IndexByte(key, '{'), strings.LastIndexByte(key, '}')
	if i < 0 || j <= i {
		return key
	}
	return key[i+1 : j]
}

// RenewedKey is the key whose TTL bounds the hold a renewal by s of field
// on name extends.
func (s *Script) RenewedKey(name, field string) string {
	if s.HoldKey != nil {
		return s.HoldKey(name, field)
	}
	return LockKey(name)
}

var all []*Script

// NewScript registers a script. Call it only from package-level variable
// declarations, so that All is complete once the program runs.
func NewScript(name, src string) *Script {
	s := &Script{Name: name, Src: src}
	all = append(all, s)
	return s
}

// renews marks s as a batch script that renews holds; keepsAlive as one
// that keeps waiters' places.
func renews(s *Script) *Script {
	s.Batch = RenewBatch
	return s
}

func keepsAlive(s *Script) *Script {
	s.Batch = KeepAliveBatch
	return s
}

// noSync marks s as a script replica sync need not wait for.
func noSync(s *Script) *Script {
	s.NoSync = true
	return s
}

// All returns every script, in registration order: runtimes load them.
func All() []*Script { return all }

// Call is one script call: which script, with which keys and arguments.
// Every reply of holdfast's scripts is an integer or an array of integers;
// runtimes hand it back as a slice (one element for an integer).
type Call struct {
	Script *Script
	Keys   []string
	Args   []string
}

// The scripts of the reentrant lock, and the watchdog's batch renewal.
var (
	AcquireScript = NewScript("acquire", Acquire)
	ReleaseScript = noSync(NewScript("release", Release))
	RenewScript   = renews(NewScript("renew", Renew))
	HandoffScript = NewScript("handoff", Handoff)
	// FenceRaiseScript raises a name's fence counter to a floor (RedLock).
	FenceRaiseScript = NewScript("fence_raise", FenceRaise)
)

// The scripts of the fair lock. Each is fence.lua and fair_common.lua
// followed by the script's own file: the queue logic they share is written
// once. A fair hold is a field of the lock hash: hash_renew.lua renews it.
var (
	FairAcquireScript   = NewScript("fair_acquire", WithFence(fairCommon+fairAcquire))
	FairReleaseScript   = NewScript("fair_release", WithFence(fairCommon+fairRelease))
	FairKeepAliveScript = keepsAlive(NewScript("fair_keepalive", WithFence(fairCommon+fairKeepAlive)))
	FairRenewScript     = renews(NewScript("fair_renew", HashRenew))
)

// Replies of the acquire script (first element of its array reply).
const (
	AcquireGranted   = 1
	AcquireHeld      = 0
	AcquireMismatch  = -1
	AcquireWrongKind = -2
)

// Replies of the release script besides a count >= 0.
const (
	ReleaseNotOwner = -1
	ReleaseMismatch = -2
)

// Millis renders a lease as the scripts take it: whole milliseconds, at
// least 1 (PEXPIRE refuses 0, and a lease below 1ms is never meant).
func Millis(d time.Duration) string {
	ms := d.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	// Most calls pass the same lease (the watchdog's) again and again: the
	// last one formatted is kept, so they allocate nothing.
	if last := lastMillis.Load(); last != nil && last.ms == ms {
		return last.s
	}
	s := strconv.FormatInt(ms, 10)
	lastMillis.Store(&formattedMillis{ms: ms, s: s})
	return s
}

type formattedMillis struct {
	ms int64
	s  string
}

// lastMillis is the last lease Millis formatted.
var lastMillis atomic.Pointer[formattedMillis]

// MaxNameLen is the longest lock name accepted, in bytes.
const MaxNameLen = 1024

// ErrInvalidName is wrapped by the errors of ValidateName.
var ErrInvalidName = errors.New("holdfast: invalid lock name")

// ValidateName reports whether name can be a lock name: non-empty, at most
// MaxNameLen bytes, and giving a non-empty hash tag once wrapped in braces, so
// it may not start with '}'. Braces later in a name are allowed: the tag then
// ends at the first '}', the same for every key of the lock.
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidName, len(name), MaxNameLen)
	case name[0] == '}':
		return fmt.Errorf("%w: %q starts with '}', which would give an empty cluster hash tag", ErrInvalidName, name)
	}
	return nil
}

// LockKey is the Redis key of the lock of name: the reentrant lock's string
// (acquire.lua), or the other kinds' hash.
func LockKey(name string) string { return "holdfast:{" + name + "}" }

// FenceKey is the Redis key of the fencing counter name draws its tokens
// from: the counter of name's cluster hash slot, shared with every other name
// of that slot.
func FenceKey(name string) string { return slotFenceKeys()[Slot(LockKey(name))] }

// GrantKeys returns the KEYS of a script that takes, reads or raises name's
// fencing token: LockKey(name), then FenceKey(name), then more (the
// script's own keys).
func GrantKeys(name string, more ...string) []string {
	return append([]string{LockKey(name), FenceKey(name)}, more...)
}

// NameKeys are the keys of one lock name, as LockKey, FenceKey,
// FairQueueKey and Channel give them.
type NameKeys struct {
	Lock, Fence, FairQueue, Channel string
}

// KeysOf returns name's keys, the three of its own cut from one string (one
// allocation rather than three: a lock actor keeps them while it lives).
func KeysOf(name string) NameKeys {
	all := "holdfast:{" + name + "}:q" + "holdfast:{" + name + "}:ch"
	n := len("holdfast:{}") + len(name)
	return NameKeys{
		Lock:      all[:n],
		FairQueue: all[:n+2],
		Channel:   all[n+2:],
		Fence:     slotFenceKeys()[Slot(all[:n])],
	}
}

// slotFenceKeys holds the fence key of every hash slot, built on first use:
// each is holdfast:slot:{TAG}:fence for the first base-36 number TAG whose
// CRC16 falls in the slot (about 90,000 candidates cover all 16,384 slots).
// The prefix "holdfast:slot:" keeps the keys apart from every lock's keys.
var slotFenceKeys = sync.OnceValue(func() *[slots]string {
	var keys [slots]string
	left := slots
	for i := int64(0); left > 0; i++ {
		tag := strconv.FormatInt(i, 36)
		if s := Slot("{" + tag + "}"); keys[s] == "" {
			keys[s] = "holdfast:slot:{" + tag + "}:fence"
			left--
		}
	}
	return &keys
})

// slots is the number of Redis Cluster hash slots.
const slots = keyslot.Count

// Slot is the Redis Cluster hash slot of key: the CRC16 of its hash tag (the
// text between the first '{' and the next '}', when not empty) or of the
// whole key, mod 16384.
func Slot(key string) uint16 { return keyslot.Of(key) }

// FairQueueKey is the hash of the fair lock's waiters (see fair_common.lua).
// The reentrant acquire checks it, so it is part of the shared layout.
func FairQueueKey(name string) string { return "holdfast:{" + name + "}:q" }

// Channel is the pub/sub channel on which the release of name is announced.
func Channel(name string) string { return "holdfast:{" + name + "}:ch" }

// ClientChannel is the channel of name that reaches only the client
// clientID (the CLIENTID:INSTANCE part of its owner fields, ClientOfField):
// the fair lock tells a waiter of its grant there.
func ClientChannel(name, clientID string) string { return Channel(name) + ":" + clientID }

// NameOfChannel returns the lock name of a channel made by Channel (or by
// a kind's per-client channel, Channel(name) + ":" + CLIENTID), or false.
func NameOfChannel(ch string) (string, bool) {
	rest, ok := strings.CutPrefix(ch, "holdfast:{")
	if !ok {
		return "", false
	}
	if name, ok := strings.CutSuffix(rest, "}:ch"); ok {
		return name, true
	}
	i := strings.LastIndex(rest, "}:ch:")
	if i < 0 {
		return "", false
	}
	return rest[:i], true
}

// Field names one owner of one Client in a lock's key (the reentrant lock's
// value, a field of the other kinds' hash):
//
//	CLIENTID ":" INSTANCE ":" OWNER
//
// CLIENTID is Config.ClientID, a readable label chosen by the user; by
// default HOST "/" PID of the process (e.g. "web-3/4121"). INSTANCE is drawn
// at random for every Client (12 hex digits), so two Clients never write the
// same field even when they share a ClientID: exclusion never depends on the
// user choosing unique labels. OWNER is the WithOwner id, or "~N" for the
// N-th Lock call of the Client. Neither CLIENTID nor INSTANCE contains ':',
// so the field splits unambiguously at its first two colons (ParseField);
// OWNER may contain anything.
func Field(clientID, instance, owner string) string {
	return clientID + ":" + instance + ":" + owner
}

// Hold is the content of a reentrant lock's key (LockKey) while the name is
// held, as acquire.lua writes it: [w]COUNT:TOKEN:FIELD.
type Hold struct {
	Field  string // the holder's owner field (see Field)
	Count  int64  // its reentry count
	Token  uint64 // the fencing token of the hold
	Waited bool   // the waiter mark: a refused acquire waits for the release
}

// ParseHold decodes the value of a reentrant lock's key, or reports false
// for a value acquire.lua does not write.
func ParseHold(v string) (Hold, bool) {
	var h Hold
	v, h.Waited = strings.CutPrefix(v, "w")
	count, rest, ok1 := strings.Cut(v, ":")
	token, field, ok2 := strings.Cut(rest, ":")
	var err1, err2 error
	h.Count, err1 = strconv.ParseInt(count, 10, 64)
	h.Token, err2 = strconv.ParseUint(token, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || h.Count < 1 || count[0] == '+' || count[0] == '-' {
		return Hold{}, false
	}
	h.Field = field
	return h, true
}

// String renders h as acquire.lua writes it.
func (h Hold) String() string {
	mark := ""
	if h.Waited {
		mark = "w"
	}
	return mark + strconv.FormatInt(h.Count, 10) + ":" + strconv.FormatUint(h.Token, 10) + ":" + h.Field
}

// ClientOfField returns the CLIENTID:INSTANCE part of an owner field, which
// names one Client; for a field without an instance part, the part before
// its first ':'.
func ClientOfField(field string) string {
	id, instance, _, ok := ParseField(field)
	if !ok {
		id, _, _ = strings.Cut(field, ":")
		return id
	}
	return id + ":" + instance
}

// ParseField splits a field made by Field into its parts; ok is false for
// a field without two colons (one written by hand, or by a holdfast version
// whose fields were CLIENTID:OWNER).
func ParseField(field string) (clientID, instance, owner string, ok bool) {
	clientID, rest, ok := strings.Cut(field, ":")
	if !ok {
		return "", "", "", false
	}
	instance, owner, ok = strings.Cut(rest, ":")
	if !ok {
		return "", "", "", false
	}
	return clientID, instance, owner, true
}
