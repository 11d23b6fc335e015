// Package scripts holds holdfast's Lua scripts and its Redis key layout: the one
// source of truth for production (run through rueidis) and for the simulator in
// package sim (run through an embedded Lua interpreter).
//
// # Key layout
//
// Every key and channel of a lock lies in the cluster hash slot of {NAME}, so
// one script may touch all of them on a Redis Cluster:
//
//	holdfast:{NAME}             hash, field CLIENTID:INSTANCE:OWNER (see Field) -> reentry count, PEXPIRE = lease
//	holdfast:slot:{TAG}:fence   fencing counter of every name in the slot of NAME (TAG is
//	                            a short tag hashing to that slot), no TTL: FenceKey
//	holdfast:{NAME}:fence       the per-name counter of earlier versions, read until a
//	                            grant moves the slot counter past it, then deleted: LegacyFenceKey
//	holdfast:{NAME}:ch          pub/sub channel, told "released" when the lock becomes free
//
// The fence counters are bounded: at most one per hash slot (16,384), however
// many names are ever locked.
//
// # Taking a fencing token
//
// Every script that grants a hold, or raises a fence, takes its token through
// the helpers of fence.lua, which this package prepends to the script (see
// WithFence): fence_take(slot, legacy) on a fresh grant, fence_peek for a
// hold already granted, fence_raise to lift a name's fence above a token
// seen elsewhere. Such a script passes the two keys FenceKeys(NAME) returns,
// in that order, among its KEYS, and hands them to the helpers, e.g. with
// KEYS = {LockKey(NAME), FenceKeys(NAME)...}:
//
//	token = fence_take(KEYS[2], KEYS[3])
//
// No script touches a fence key any other way.
//
// The scripts' arguments and replies are documented at the top of each .lua file.
package scripts

import (
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Lua sources, embedded from the .lua files beside this file.
var (
	//go:embed release.lua
	Release string
	//go:embed renew.lua
	Renew string
)

// The granting scripts, with fence.lua in front.
var (
	Acquire = WithFence(acquireBody)
	Handoff = WithFence(handoffBody)
)

var (
	//go:embed fence.lua
	fencePrelude string
	//go:embed acquire.lua
	acquireBody string
	//go:embed handoff.lua
	handoffBody string
)

// WithFence returns the script body with fence.lua's helpers in front: the
// one way a script takes, reads or raises a fencing token.
func WithFence(body string) string { return fencePrelude + body }

// Replies of the acquire script (first element of its array reply).
const (
	AcquireGranted  = 1
	AcquireHeld     = 0
	AcquireMismatch = -1
)

// Replies of the release script besides a count >= 0.
const (
	ReleaseNotOwner = -1
	ReleaseMismatch = -2
)

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

// LockKey is the Redis key of the lock hash of name.
func LockKey(name string) string { return "holdfast:{" + name + "}" }

// FenceKey is the Redis key of the fencing counter name draws its tokens
// from: the counter of name's cluster hash slot, shared with every other name
// of that slot.
func FenceKey(name string) string { return slotFenceKeys()[Slot(LockKey(name))] }

// LegacyFenceKey is the per-name fencing counter of holdfast versions before
// the slot counters; the scripts read it while it exists (see fence.lua).
func LegacyFenceKey(name string) string { return "holdfast:{" + name + "}:fence" }

// FenceKeys returns the KEYS a script that takes a token for name passes to
// the fence helpers: FenceKey(name), then LegacyFenceKey(name).
func FenceKeys(name string) []string { return []string{FenceKey(name), LegacyFenceKey(name)} }

// GrantKeys returns the KEYS of the acquire and handoff scripts for name:
// LockKey(name), then FenceKeys(name).
func GrantKeys(name string) []string {
	return []string{LockKey(name), FenceKey(name), LegacyFenceKey(name)}
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
const slots = 16384

// Slot is the Redis Cluster hash slot of key: the CRC16 of its hash tag (the
// text between the first '{' and the next '}', when not empty) or of the
// whole key, mod 16384.
func Slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % slots
}

// Channel is the pub/sub channel on which the release of name is announced.
func Channel(name string) string { return "holdfast:{" + name + "}:ch" }

// NameOfChannel returns the lock name of a channel made by Channel, or false.
func NameOfChannel(ch string) (string, bool) {
	if !strings.HasPrefix(ch, "holdfast:{") || !strings.HasSuffix(ch, "}:ch") {
		return "", false
	}
	return ch[len("holdfast:{") : len(ch)-len("}:ch")], true
}

// Field is the hash field of one owner of one Client in the lock hash:
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
