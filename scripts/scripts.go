// Package scripts holds holdfast's Lua scripts and its Redis key layout: the one
// source of truth for production (run through rueidis) and for the simulator in
// package sim (run through an embedded Lua interpreter).
//
// # Key layout
//
// Every key and channel of a lock shares the hash tag {NAME}, so one script may
// touch all of them on a Redis Cluster:
//
//	holdfast:{NAME}        hash, field CLIENTID:OWNER -> reentry count, PEXPIRE = lease
//	holdfast:{NAME}:fence  fencing counter, INCR on every fresh grant, no TTL
//	holdfast:{NAME}:ch     pub/sub channel, told "released" when the lock becomes free
//	                       and someone waits (see WaitKey)
//	holdfast:{NAME}:w      waiter mark, set by a refused acquire, PEXPIRE = the sleep it covers
//
// Kinds other than the reentrant lock add their own keys (see each kind's
// scripts) and mark the lock hash with a field "kind" naming the kind; owner
// fields always contain ':', so the marker never collides with an owner. A
// fresh grant of one kind refuses a name whose hash or fair queue says it is
// in use as another.
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
	"time"
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
	//go:embed fence_raise.lua
	FenceRaise string

	//go:embed fair_common.lua
	fairCommon string
	//go:embed fair_acquire.lua
	fairAcquire string
	//go:embed fair_release.lua
	fairRelease string
	//go:embed fair_keepalive.lua
	fairKeepAlive string
)

// Script is one Lua script. Scripts are made once, at package
// initialisation, by NewScript; All lists them.
type Script struct {
	Name string // the .lua file's base name, for logs and errors
	Src  string
}

var all []*Script

// NewScript registers a script. Call it only from package-level variable
// declarations, so that All is complete once the program runs.
func NewScript(name, src string) *Script {
	s := &Script{Name: name, Src: src}
	all = append(all, s)
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
	ReleaseScript = NewScript("release", Release)
	RenewScript   = NewScript("renew", Renew)
	HandoffScript = NewScript("handoff", Handoff)
	// FenceRaiseScript raises a name's fence counter to a floor (RedLock).
	FenceRaiseScript = NewScript("fence_raise", FenceRaise)
)

// The scripts of the fair lock. Each is fair_common.lua followed by the
// script's own file: the queue logic they share is written once.
var (
	FairAcquireScript   = NewScript("fair_acquire", fairCommon+fairAcquire)
	FairReleaseScript   = NewScript("fair_release", fairCommon+fairRelease)
	FairKeepAliveScript = NewScript("fair_keepalive", fairCommon+fairKeepAlive)
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
	return strconv.FormatInt(ms, 10)
}

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

// WaitKey is the waiter mark of name: acquire.lua sets it, with a TTL that
// outlives the refused waiter's sleep, and release.lua announces a release
// on Channel(name) only while it lives (or the releasing client has waiters
// of its own), so a lock nobody waits for is released without a PUBLISH.
func WaitKey(name string) string { return "holdfast:{" + name + "}:w" }

// FairQueueKey is the hash of the fair lock's waiters (see fair_common.lua).
// The reentrant acquire checks it, so it is part of the shared layout.
func FairQueueKey(name string) string { return "holdfast:{" + name + "}:q" }

// Channel is the pub/sub channel on which the release of name is announced.
func Channel(name string) string { return "holdfast:{" + name + "}:ch" }

// ClientChannel is the channel of name that reaches only the client
// clientID: the fair lock tells a waiter of its grant there.
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

// Field is the hash field of an owner of a client.
func Field(clientID, owner string) string { return clientID + ":" + owner }
