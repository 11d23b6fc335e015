package sim

import (
	"math"
	"sort"
	"strconv"
	"strings"
)

// What the Redisson layout's semaphore scripts use beyond the sorted-set
// commands of node_coll.go: DECRBY, ZRANGEBYSCORE with WITHSCORES and
// LIMIT, and ZRANGE by index WITHSCORES. The sets are node_coll.go's
// collections; reads only, but for DECRBY, which goes through INCRBY.

// doZset runs cmd when it is one of these commands; ok false otherwise
// (a plain ZRANGE is node_coll.go's).
func (n *Node) doZset(cmd string, a []string) (r Reply, ok bool) {
	switch {
	case cmd == "DECRBY":
		if len(a) != 2 {
			return arity(cmd), true
		}
		v, err := strconv.ParseInt(a[1], 10, 64)
		if err != nil || v == math.MinInt64 {
			return notInt(), true
		}
		n.Calls-- // INCRBY counts it
		return n.Do("INCRBY", a[0], strconv.FormatInt(-v, 10)), true
	case cmd == "ZRANGEBYSCORE", cmd == "ZRANGE" && len(a) > 3:
		return n.zrange(cmd, a), true
	}
	return Reply{}, false
}

type member struct {
	name  string
	score float64
}

// zrange implements ZRANGE key start stop [WITHSCORES] and ZRANGEBYSCORE
// key min max [WITHSCORES] [LIMIT offset count].
func (n *Node) zrange(cmd string, a []string) Reply {
	if len(a) < 3 {
		return arity(cmd)
	}
	with, offset, count := false, 0, -1
	for i := 3; i < len(a); i++ {
		switch strings.ToUpper(a[i]) {
		case "WITHSCORES":
			with = true
		case "LIMIT":
			if cmd != "ZRANGEBYSCORE" || i+2 >= len(a) {
				return errReply("ERR syntax error")
			}
			o, err1 := strconv.Atoi(a[i+1])
			c, err2 := strconv.Atoi(a[i+2])
			if err1 != nil || err2 != nil {
				return notInt()
			}
			offset, count = o, c
			i += 2
		default:
			return errReply("ERR syntax error")
		}
	}
	c, bad := n.coll(a[0], true, false)
	if bad {
		return wrongType()
	}
	var all []member
	if c != nil {
		all = make([]member, 0, len(c.zset))
		for m, s := range c.zset {
			all = append(all, member{m, s})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		return all[i].score < all[j].score || all[i].score == all[j].score && all[i].name < all[j].name
	})
	var picked []member
	if cmd == "ZRANGE" {
		start, err1 := strconv.Atoi(a[1])
		stop, err2 := strconv.Atoi(a[2])
		if err1 != nil || err2 != nil {
			return notInt()
		}
		if start < 0 {
			start += len(all)
		}
		if stop < 0 {
			stop += len(all)
		}
		start, stop = max(start, 0), min(stop, len(all)-1)
		if start <= stop {
			picked = all[start : stop+1]
		}
	} else {
		lo, loOpen, err1 := parseBound(a[1])
		hi, hiOpen, err2 := parseBound(a[2])
		if err1 != nil || err2 != nil {
			return errReply("ERR min or max is not a float")
		}
		for _, m := range all {
			if (m.score > lo || !loOpen && m.score == lo) && (m.score < hi || !hiOpen && m.score == hi) {
				picked = append(picked, m)
			}
		}
		if offset > 0 {
			picked = picked[min(offset, len(picked)):]
		}
		if count >= 0 && count < len(picked) {
			picked = picked[:count]
		}
	}
	out := make([]Reply, 0, 2*len(picked))
	for _, m := range picked {
		out = append(out, bulkReply(m.name))
		if with {
			out = append(out, bulkReply(formatScore(m.score)))
		}
	}
	return arrayReply(out...)
}

// parseBound parses a score bound: a float, "(" before it for an open one,
// -inf or +inf.
func parseBound(s string) (v float64, open bool, err error) {
	if strings.HasPrefix(s, "(") {
		open, s = true, s[1:]
	}
	switch strings.ToLower(s) {
	case "-inf":
		return math.Inf(-1), open, nil
	case "+inf", "inf":
		return math.Inf(1), open, nil
	}
	v, err = strconv.ParseFloat(s, 64)
	return v, open, err
}
