// Package scripts holds holdfast's Lua scripts and its Redis key layout: the one
// source of truth for production (run through rueidis) and for the simulator in
// package sim (run through an embedded Lua interpreter).
//
// # Key layout
//
// Every key and channel of a lock shares the hash tag {NAME}, so one script may
// touch all of them on a Redis Cluster:
//
//	holdfast:{NAME}        hash, field CLIENTID:INSTANCE:OWNER (see Field) -> reentry count, PEXPIRE = lease
//	holdfast:{NAME}:fence  fencing counter, INCR on every fresh grant, no TTL
//	holdfast:{NAME}:ch     pub/sub channel, told "released" when the lock becomes free
//
// The scripts' arguments and replies are documented at the top of each .lua file.
package scripts

import (
	_ "embed"
	"errors"
	"fmt"
	"strings"
)

// Lua sources, embedded from the .lua files beside this file.
var (
	//go:embed acquire.lua
	Acquire string
	//go:embed release.lua
	Release string
	//go:embed renew.lua
	Renew string
	//go:embed handoff.lua
	Handoff string
)

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

// FenceKey is the Redis key of the fencing counter of name.
func FenceKey(name string) string { return "holdfast:{" + name + "}:fence" }

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
