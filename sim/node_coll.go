package sim

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Lists and sorted sets, for the Redisson layout's fair lock (its line is a
// list, its deadlines a sorted set): the commands its scripts use, with
// Redis's replies. An emptied list or set is deleted, as in Redis. Every
// change is replicated as the command that made it (they are
// deterministic).

// collection is a list or a sorted set (zset non-nil).
type collection struct {
	list []string
	zset map[string]float64
}

func (c *collection) typ() string {
	if c.zset != nil {
		return "zset"
	}
	return "list"
}

// clone returns a deep copy of c.
func (c *collection) clone() *collection {
	d := &collection{list: append([]string(nil), c.list...)}
	if c.zset != nil {
		d.zset = make(map[string]float64, len(c.zset))
		for m, f := range c.zset {
			d.zset[m] = f
		}
	}
	return d
}

func (c *collection) empty() bool { return len(c.list) == 0 && len(c.zset) == 0 }

// coll returns the collection of key of the given type (nil if absent and
// !create); bad when key holds another type.
func (n *Node) coll(key string, zset, create bool) (c *collection, bad bool) {
	e := n.get(key)
	if e == nil {
		if !create {
			return nil, false
		}
		c = &collection{}
		if zset {
			c.zset = map[string]float64{}
		}
		n.data[key] = &entry{coll: c}
		return c, false
	}
	if e.coll == nil || (e.coll.zset != nil) != zset {
		return nil, true
	}
	return e.coll, false
}

// dropEmpty deletes key once its collection is empty.
func (n *Node) dropEmpty(key string, c *collection) {
	if c.empty() {
		delete(n.data, key)
	}
}

// formatScore renders a score as Redis replies it.
func formatScore(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e17 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', 17, 64)
}

// span turns Redis's start/stop indices (negative: from the end) into a
// slice range of a sequence of length l; ok false when empty.
func span(startS, stopS string, l int) (from, to int, ok bool, err error) {
	start, err1 := strconv.Atoi(startS)
	stop, err2 := strconv.Atoi(stopS)
	if err1 != nil || err2 != nil {
		return 0, 0, false, fmt.Errorf("ERR value is not an integer or out of range")
	}
	if start < 0 {
		start = max(0, l+start)
	}
	if stop < 0 {
		stop = l + stop
	}
	stop = min(stop, l-1)
	if start > stop {
		return 0, 0, false, nil
	}
	return start, stop + 1, true, nil
}

// ranked returns the members of a sorted set by score, then member.
func (c *collection) ranked() []string {
	ms := make([]string, 0, len(c.zset))
	for m := range c.zset {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool {
		a, b := c.zset[ms[i]], c.zset[ms[j]]
		return a < b || a == b && ms[i] < ms[j]
	})
	return ms
}

func bulks(xs []string) Reply {
	out := make([]Reply, len(xs))
	for i, x := range xs {
		out[i] = bulkReply(x)
	}
	return arrayReply(out...)
}

// doColl runs a list or sorted-set command; ok false when cmd is none.
func (n *Node) doColl(cmd string, a []string) (r Reply, ok bool) {
	zset := strings.HasPrefix(cmd, "Z")
	switch cmd {
	case "RPUSH", "LPOP", "LINDEX", "LLEN", "LRANGE", "LREM", "LPOS", "LINSERT",
		"ZADD", "ZINCRBY", "ZSCORE", "ZREM", "ZRANGE", "ZRANK", "ZCARD":
	default:
		return Reply{}, false
	}
	arities := map[string]int{"RPUSH": 2, "LPOP": 1, "LINDEX": 2, "LLEN": 1, "LRANGE": 3, "LREM": 3, "LPOS": 2, "LINSERT": 4,
		"ZADD": 3, "ZINCRBY": 3, "ZSCORE": 2, "ZREM": 2, "ZRANGE": 3, "ZRANK": 2, "ZCARD": 1}
	if len(a) < arities[cmd] {
		return arity(cmd), true
	}
	writes := cmd == "RPUSH" || cmd == "ZADD" || cmd == "ZINCRBY"
	c, bad := n.coll(a[0], zset, writes)
	if bad {
		return wrongType(), true
	}
	if c == nil {
		c = &collection{} // absent: an empty one, never stored
		if zset {
			c.zset = map[string]float64{}
		}
	}
	switch cmd {
	case "RPUSH":
		c.list = append(c.list, a[1:]...)
		n.write(append([]string{cmd}, a...)...)
		return intReply(int64(len(c.list))), true
	case "LPOP":
		if len(c.list) == 0 {
			return nilReply(), true
		}
		v := c.list[0]
		c.list = c.list[1:]
		n.write(cmd, a[0])
		n.dropEmpty(a[0], c)
		return bulkReply(v), true
	case "LINDEX":
		i, err := strconv.Atoi(a[1])
		if err != nil {
			return errReply("ERR value is not an integer or out of range"), true
		}
		if i < 0 {
			i += len(c.list)
		}
		if i < 0 || i >= len(c.list) {
			return nilReply(), true
		}
		return bulkReply(c.list[i]), true
	case "LLEN":
		return intReply(int64(len(c.list))), true
	case "LRANGE":
		from, to, some, err := span(a[1], a[2], len(c.list))
		if err != nil {
			return errReply(err.Error()), true
		}
		if !some {
			return arrayReply(), true
		}
		return bulks(c.list[from:to]), true
	case "LREM":
		if a[1] != "0" {
			return errReply("ERR the simulator's LREM takes count 0 only"), true
		}
		keep := c.list[:0:0]
		for _, v := range c.list {
			if v != a[2] {
				keep = append(keep, v)
			}
		}
		removed := len(c.list) - len(keep)
		if removed > 0 {
			c.list = keep
			n.write(cmd, a[0], a[1], a[2])
			n.dropEmpty(a[0], c)
		}
		return intReply(int64(removed)), true
	case "LINSERT":
		if !strings.EqualFold(a[1], "before") {
			return errReply("ERR the simulator's LINSERT takes BEFORE only"), true
		}
		for i, v := range c.list {
			if v == a[2] {
				c.list = append(c.list[:i], append([]string{a[3]}, c.list[i:]...)...)
				n.write(cmd, a[0], a[1], a[2], a[3])
				return intReply(int64(len(c.list))), true
			}
		}
		if len(c.list) == 0 {
			return intReply(0), true
		}
		return intReply(-1), true
	case "LPOS":
		for i, v := range c.list {
			if v == a[1] {
				return intReply(int64(i)), true
			}
		}
		return nilReply(), true
	case "ZADD", "ZINCRBY":
		if cmd == "ZADD" && len(a)%2 != 1 {
			n.dropEmpty(a[0], c)
			return errReply("ERR syntax error"), true
		}
		var added int64
		var last float64
		for i := 1; i+1 < len(a); i += 2 {
			f, err := strconv.ParseFloat(a[i], 64)
			if err != nil {
				n.dropEmpty(a[0], c)
				return errReply("ERR value is not a valid float"), true
			}
			old, had := c.zset[a[i+1]]
			if !had {
				added++
			}
			if cmd == "ZINCRBY" {
				f += old
			}
			c.zset[a[i+1]], last = f, f
		}
		n.write(append([]string{cmd}, a...)...)
		if cmd == "ZINCRBY" {
			return bulkReply(formatScore(last)), true
		}
		return intReply(added), true
	case "ZSCORE":
		f, had := c.zset[a[1]]
		if !had {
			return nilReply(), true
		}
		return bulkReply(formatScore(f)), true
	case "ZREM":
		var removed int64
		for _, m := range a[1:] {
			if _, had := c.zset[m]; had {
				delete(c.zset, m)
				removed++
			}
		}
		if removed > 0 {
			n.write(append([]string{cmd}, a...)...)
			n.dropEmpty(a[0], c)
		}
		return intReply(removed), true
	case "ZRANGE":
		ms := c.ranked()
		from, to, some, err := span(a[1], a[2], len(ms))
		if err != nil {
			return errReply(err.Error()), true
		}
		if !some {
			return arrayReply(), true
		}
		return bulks(ms[from:to]), true
	case "ZRANK":
		for i, m := range c.ranked() {
			if m == a[1] {
				return intReply(int64(i)), true
			}
		}
		return nilReply(), true
	}
	return intReply(int64(len(c.zset))), true // ZCARD
}
