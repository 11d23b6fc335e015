package sim

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

const errWrongType = "WRONGTYPE Operation against a key holding the wrong kind of value"

type entry struct {
	str      *string
	hash     map[string]string
	coll     *collection // a list or a sorted set (node_coll.go)
	expireAt time.Time   // zero: no TTL
}

// Node is one simulated Redis server: an in-memory keyspace of strings, sorted sets and
// hashes whose TTLs follow the virtual time given by now, and a Lua engine
// that runs the same scripts as production (see Eval). Every write it
// applies is appended to its replication log, with expiries made absolute
// (PEXPIREAT), as Redis 7 replicates script effects. A Node is not safe for
// concurrent use: the World runs everything on one goroutine.
type Node struct {
	now  func() time.Time
	data map[string]*entry
	lua  *luaEngine
	// OnPublish delivers a PUBLISH; it returns the number of receivers.
	OnPublish func(channel, message string) int64
	// log is the replication stream: every write applied, in order.
	log [][]string
	// Calls counts the commands run (a script counts once, its redis.call
	// commands each once more).
	Calls int
	// applying is set while a replicated write is replayed: as on a Redis
	// replica, keys past their TTL are not expired then (the primary's DEL
	// will come), so a replayed HSET cannot recreate a key without its TTL.
	applying bool
}

// NewNode returns an empty node on the virtual clock now.
func NewNode(now func() time.Time) *Node {
	return &Node{now: now, data: make(map[string]*entry)}
}

// Log returns the replication stream since the node started (or was reset).
func (n *Node) Log() [][]string { return n.log }

// Reset empties the keyspace and the log: a restart without persistence.
func (n *Node) Reset() {
	n.data = make(map[string]*entry)
	n.log = nil
}

// Apply replays one replicated write on this node (a replica).
func (n *Node) Apply(cmd []string) {
	n.applying = true
	defer func() { n.applying = false }()
	n.Do(cmd...)
}

// get returns the live entry of key, expiring it lazily; an expiry is
// replicated as a DEL, as Redis does.
func (n *Node) get(key string) *entry {
	e := n.data[key]
	if e == nil {
		return nil
	}
	if !e.expireAt.IsZero() && !n.now().Before(e.expireAt) && !n.applying {
		delete(n.data, key)
		n.write("DEL", key)
		return nil
	}
	return e
}

func (n *Node) write(args ...string) { n.log = append(n.log, args) }

// Do runs one command and returns its reply.
func (n *Node) Do(args ...string) Reply {
	n.Calls++
	if len(args) == 0 {
		return errReply("ERR empty command")
	}
	cmd := strings.ToUpper(args[0])
	a := args[1:]
	need := func(min int, exact bool) bool {
		return len(a) < min || (exact && len(a) != min)
	}
	switch cmd {
	case "PING":
		return statusReply("PONG")
	case "TIME":
		// The node's virtual clock, as [seconds, microseconds].
		t := n.now()
		return arrayReply(bulkReply(strconv.FormatInt(t.Unix(), 10)), bulkReply(strconv.FormatInt(int64(t.Nanosecond()/1000), 10)))
	case "GET":
		if need(1, true) {
			return arity(cmd)
		}
		e := n.get(a[0])
		if e == nil {
			return nilReply()
		}
		if e.str == nil {
			return wrongType()
		}
		return bulkReply(*e.str)
	case "SET":
		return n.set(a)
	case "DEL":
		if need(1, false) {
			return arity(cmd)
		}
		var c int64
		for _, k := range a {
			if n.get(k) != nil {
				delete(n.data, k)
				c++
			}
		}
		if c > 0 {
			n.write(append([]string{"DEL"}, a...)...)
		}
		return intReply(c)
	case "EXISTS":
		if need(1, false) {
			return arity(cmd)
		}
		var c int64
		for _, k := range a {
			if n.get(k) != nil {
				c++
			}
		}
		return intReply(c)
	case "INCR", "INCRBY":
		by := int64(1)
		if cmd == "INCRBY" {
			if need(2, true) {
				return arity(cmd)
			}
			v, err := strconv.ParseInt(a[1], 10, 64)
			if err != nil {
				return notInt()
			}
			by = v
		} else if need(1, true) {
			return arity(cmd)
		}
		e := n.get(a[0])
		var cur int64
		if e != nil {
			if e.str == nil {
				return wrongType()
			}
			v, err := strconv.ParseInt(*e.str, 10, 64)
			if err != nil {
				return notInt()
			}
			cur = v
		} else {
			e = &entry{}
			n.data[a[0]] = e
		}
		s := strconv.FormatInt(cur+by, 10)
		e.str = &s
		n.write("SET", a[0], s, "KEEPTTL")
		return intReply(cur + by)
	case "PEXPIRE", "PEXPIREAT":
		if need(2, false) || len(a) > 3 {
			return arity(cmd)
		}
		v, err := strconv.ParseInt(a[1], 10, 64)
		if err != nil {
			return notInt()
		}
		cond := ""
		if len(a) == 3 {
			cond = strings.ToUpper(a[2])
			if cond != "NX" && cond != "XX" && cond != "GT" && cond != "LT" {
				return errReply("ERR Unsupported option " + a[2])
			}
		}
		e := n.get(a[0])
		if e == nil {
			return intReply(0)
		}
		at := time.UnixMilli(v)
		if cmd == "PEXPIRE" {
			at = n.now().Add(time.Duration(v) * time.Millisecond)
		}
		// The conditions of Redis 7.0: a key without a TTL counts as one
		// that never expires (GT never sets it, LT always does).
		switch persistent := e.expireAt.IsZero(); cond {
		case "NX":
			if !persistent {
				return intReply(0)
			}
		case "XX":
			if persistent {
				return intReply(0)
			}
		case "GT":
			if persistent || !at.After(e.expireAt) {
				return intReply(0)
			}
		case "LT":
			if !persistent && !at.Before(e.expireAt) {
				return intReply(0)
			}
		}
		if !at.After(n.now()) {
			delete(n.data, a[0])
			n.write("DEL", a[0])
			return intReply(1)
		}
		e.expireAt = at
		n.write("PEXPIREAT", a[0], strconv.FormatInt(at.UnixMilli(), 10))
		return intReply(1)
	case "PTTL":
		if need(1, true) {
			return arity(cmd)
		}
		e := n.get(a[0])
		switch {
		case e == nil:
			return intReply(-2)
		case e.expireAt.IsZero():
			return intReply(-1)
		}
		return intReply(int64(e.expireAt.Sub(n.now()) / time.Millisecond))
	case "TYPE":
		if need(1, true) {
			return arity(cmd)
		}
		switch e := n.get(a[0]); {
		case e == nil:
			return statusReply("none")
		case e.hash != nil:
			return statusReply("hash")
		case e.coll != nil:
			return statusReply(e.coll.typ())
		}
		return statusReply("string")
	case "PERSIST":
		if need(1, true) {
			return arity(cmd)
		}
		e := n.get(a[0])
		if e == nil || e.expireAt.IsZero() {
			return intReply(0)
		}
		e.expireAt = time.Time{}
		n.write("PERSIST", a[0])
		return intReply(1)
	case "HGET", "HEXISTS":
		if need(2, true) {
			return arity(cmd)
		}
		h, bad := n.hash(a[0], false)
		if bad {
			return wrongType()
		}
		v, ok := h[a[1]]
		if cmd == "HEXISTS" {
			return intReply(b2i(ok))
		}
		if !ok {
			return nilReply()
		}
		return bulkReply(v)
	case "HSET":
		if len(a) < 3 || len(a)%2 == 0 {
			return arity(cmd)
		}
		h, bad := n.hash(a[0], true)
		if bad {
			return wrongType()
		}
		var added int64
		for i := 1; i < len(a); i += 2 {
			if _, ok := h[a[i]]; !ok {
				added++
			}
			h[a[i]] = a[i+1]
		}
		n.write(append([]string{"HSET"}, a...)...)
		return intReply(added)
	case "HDEL":
		if need(2, false) {
			return arity(cmd)
		}
		h, bad := n.hash(a[0], false)
		if bad {
			return wrongType()
		}
		var c int64
		for _, f := range a[1:] {
			if _, ok := h[f]; ok {
				delete(h, f)
				c++
			}
		}
		if c > 0 {
			if len(h) == 0 {
				delete(n.data, a[0])
			}
			n.write(append([]string{"HDEL"}, a...)...)
		}
		return intReply(c)
	case "HLEN":
		if need(1, true) {
			return arity(cmd)
		}
		h, bad := n.hash(a[0], false)
		if bad {
			return wrongType()
		}
		return intReply(int64(len(h)))
	case "HMGET":
		if need(2, false) {
			return arity(cmd)
		}
		h, bad := n.hash(a[0], false)
		if bad {
			return wrongType()
		}
		out := make([]Reply, 0, len(a)-1)
		for _, f := range a[1:] {
			if v, ok := h[f]; ok {
				out = append(out, bulkReply(v))
			} else {
				out = append(out, nilReply())
			}
		}
		return arrayReply(out...)
	case "HGETALL":
		if need(1, true) {
			return arity(cmd)
		}
		h, bad := n.hash(a[0], false)
		if bad {
			return wrongType()
		}
		keys := make([]string, 0, len(h))
		for f := range h {
			keys = append(keys, f)
		}
		sort.Strings(keys)
		out := make([]Reply, 0, 2*len(h))
		for _, f := range keys {
			out = append(out, bulkReply(f), bulkReply(h[f]))
		}
		return arrayReply(out...)
	case "HINCRBY":
		if need(3, true) {
			return arity(cmd)
		}
		by, err := strconv.ParseInt(a[2], 10, 64)
		if err != nil {
			return notInt()
		}
		h, bad := n.hash(a[0], true)
		if bad {
			return wrongType()
		}
		var cur int64
		if v, ok := h[a[1]]; ok {
			if cur, err = strconv.ParseInt(v, 10, 64); err != nil {
				return errReply("ERR hash value is not an integer")
			}
		}
		h[a[1]] = strconv.FormatInt(cur+by, 10)
		n.write("HSET", a[0], a[1], h[a[1]])
		return intReply(cur + by)
	case "PUBLISH":
		if need(2, true) {
			return arity(cmd)
		}
		if n.OnPublish == nil {
			return intReply(0)
		}
		return intReply(n.OnPublish(a[0], a[1]))
	case "FLUSHALL":
		n.data = make(map[string]*entry)
		n.write("FLUSHALL")
		return okReply()
	case "KEYS":
		if need(1, true) {
			return arity(cmd)
		}
		var keys []string
		for k := range n.data {
			if n.get(k) != nil && (a[0] == "*" || k == a[0]) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		out := make([]Reply, len(keys))
		for i, k := range keys {
			out[i] = bulkReply(k)
		}
		return arrayReply(out...)
	case "EVAL":
		if need(2, false) {
			return arity(cmd)
		}
		nk, err := strconv.Atoi(a[1])
		if err != nil || nk < 0 || nk > len(a)-2 {
			return errReply("ERR Number of keys can't be greater than number of args")
		}
		return n.Eval(a[0], a[2:2+nk], a[2+nk:])
	}
	if r, ok := n.doZset(cmd, a); ok {
		return r
	}
	if r, ok := n.doColl(cmd, a); ok {
		return r
	}
	return errReply(fmt.Sprintf("ERR unknown command '%s'", args[0]))
}

// set implements SET key value [PX ms] [NX|XX] [KEEPTTL] [GET].
func (n *Node) set(a []string) Reply {
	if len(a) < 2 {
		return arity("SET")
	}
	var px int64 = -1
	nx, xx, keep, get := false, false, false, false
	for i := 2; i < len(a); i++ {
		switch strings.ToUpper(a[i]) {
		case "PX":
			if i+1 >= len(a) {
				return syntaxErr()
			}
			v, err := strconv.ParseInt(a[i+1], 10, 64)
			if err != nil {
				return notInt()
			}
			if v <= 0 {
				return errReply("ERR invalid expire time in 'set' command")
			}
			px = v
			i++
		case "NX":
			nx = true
		case "XX":
			xx = true
		case "KEEPTTL":
			keep = true
		case "GET":
			get = true
		default:
			return syntaxErr()
		}
	}
	if (nx && xx) || (keep && px > 0) {
		return syntaxErr()
	}
	old := n.get(a[0])
	// GET answers the old value (nil when there was none); on a hash, SET
	// GET fails and writes nothing, as in Redis 7.0.
	prev := nilReply()
	if get && old != nil {
		if old.str == nil {
			return wrongType()
		}
		prev = bulkReply(*old.str)
	}
	done := okReply()
	if get {
		done = prev
	}
	if (nx && old != nil) || (xx && old == nil) {
		return prev
	}
	s := a[1]
	e := &entry{str: &s}
	if keep && old != nil {
		e.expireAt = old.expireAt
	}
	if px > 0 {
		e.expireAt = n.now().Add(time.Duration(px) * time.Millisecond)
	}
	n.data[a[0]] = e
	n.write("SET", a[0], s)
	if !e.expireAt.IsZero() {
		n.write("PEXPIREAT", a[0], strconv.FormatInt(e.expireAt.UnixMilli(), 10))
	}
	return done
}

// hash returns the hash at key (nil if absent and !create); bad is true
// when key holds another type.
func (n *Node) hash(key string, create bool) (h map[string]string, bad bool) {
	e := n.get(key)
	if e == nil {
		if !create {
			return nil, false
		}
		e = &entry{hash: make(map[string]string)}
		n.data[key] = e
	}
	if e.hash == nil {
		return nil, true
	}
	return e.hash, false
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// expiry returns when key expires (zero: absent or no TTL).
func (n *Node) expiry(key string) time.Time {
	if e := n.get(key); e != nil {
		return e.expireAt
	}
	return time.Time{}
}

// Dump returns a canonical text of the keyspace: one line per live key with
// its type, value and absolute expiry in milliseconds (or -1).
func (n *Node) Dump() string {
	keys := make([]string, 0, len(n.data))
	for k := range n.data {
		if n.get(k) != nil {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		e := n.data[k]
		exp := int64(-1)
		if !e.expireAt.IsZero() {
			exp = e.expireAt.UnixMilli()
		}
		if e.str != nil {
			fmt.Fprintf(&b, "%s string %q exp=%d\n", k, *e.str, exp)
			continue
		}
		if e.coll != nil {
			fmt.Fprintf(&b, "%s %s %v %v exp=%d\n", k, e.coll.typ(), e.coll.list, e.coll.zset, exp)
			continue
		}
		fs := make([]string, 0, len(e.hash))
		for f, v := range e.hash {
			fs = append(fs, f+"="+v)
		}
		sort.Strings(fs)
		fmt.Fprintf(&b, "%s hash %v exp=%d\n", k, fs, exp)
	}
	return b.String()
}
