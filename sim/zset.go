package sim

import (
	"math"
	"sort"
	"strconv"
	"strings"
)

// The sorted-set commands the Redisson layout's semaphore scripts use
// (Redisson's lease records), and DECRBY: ZADD (plain), ZSCORE, ZREM,
// ZCARD, ZRANGE by index and ZRANGEBYSCORE, with WITHSCORES and LIMIT. As in
// Redis, a sorted set left empty is deleted. Writes replicate as ZADD and
// ZREM, whose replay is idempotent.

// doZset runs cmd when it is one of these commands; ok false otherwise.
func (n *Node) doZset(cmd string, a []string) (r Reply, ok bool) {
	switch cmd {
	case "DECRBY":
		if len(a) != 2 {
			return arity(cmd), true
		}
		v, err := strconv.ParseInt(a[1], 10, 64)
		if err != nil || v == math.MinInt64 {
			return notInt(), true
		}
		n.Calls-- // INCRBY counts it
		return n.Do("INCRBY", a[0], strconv.FormatInt(-v, 10)), true
	case "ZADD":
		if len(a) < 3 || len(a)%2 != 1 {
			return arity(cmd), true
		}
		scores := make([]float64, 0, len(a)/2)
		for i := 1; i < len(a); i += 2 {
			s, err := strconv.ParseFloat(a[i], 64)
			if err != nil || math.IsNaN(s) {
				return errReply("ERR value is not a valid float"), true
			}
			scores = append(scores, s)
		}
		z, bad := n.zset(a[0], true)
		if bad {
			return wrongType(), true
		}
		var added int64
		for i, s := range scores {
			m := a[2+2*i]
			if _, had := z[m]; !had {
				added++
			}
			z[m] = s
			n.write("ZADD", a[0], formatScore(s), m)
		}
		return intReply(added), true
	case "ZSCORE":
		if len(a) != 2 {
			return arity(cmd), true
		}
		z, bad := n.zset(a[0], false)
		if bad {
			return wrongType(), true
		}
		if s, had := z[a[1]]; had {
			return bulkReply(formatScore(s)), true
		}
		return nilReply(), true
	case "ZCARD":
		if len(a) != 1 {
			return arity(cmd), true
		}
		z, bad := n.zset(a[0], false)
		if bad {
			return wrongType(), true
		}
		return intReply(int64(len(z))), true
	case "ZREM":
		if len(a) < 2 {
			return arity(cmd), true
		}
		z, bad := n.zset(a[0], false)
		if bad {
			return wrongType(), true
		}
		var removed int64
		for _, m := range a[1:] {
			if _, had := z[m]; had {
				delete(z, m)
				removed++
				n.write("ZREM", a[0], m)
			}
		}
		if z != nil && len(z) == 0 {
			delete(n.data, a[0])
			n.write("DEL", a[0])
		}
		return intReply(removed), true
	case "ZRANGE", "ZRANGEBYSCORE":
		return n.zrange(cmd, a), true
	}
	return Reply{}, false
}

// zset returns the sorted set at key (nil when absent and not created), or
// bad for a key of another type.
func (n *Node) zset(key string, create bool) (z map[string]float64, bad bool) {
	e := n.get(key)
	if e == nil {
		if !create {
			return nil, false
		}
		e = &entry{zset: make(map[string]float64)}
		n.data[key] = e
	}
	if e.zset == nil {
		return nil, true
	}
	return e.zset, false
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
	z, bad := n.zset(a[0], false)
	if bad {
		return wrongType()
	}
	all := make([]member, 0, len(z))
	for m, s := range z {
		all = append(all, member{m, s})
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

// formatScore renders a score as Redis does: an integral one without a
// fraction or exponent.
func formatScore(s float64) string {
	if s == math.Trunc(s) && math.Abs(s) < 1e17 {
		return strconv.FormatFloat(s, 'f', -1, 64)
	}
	return strconv.FormatFloat(s, 'g', 17, 64)
}

// zsetText renders a sorted set for Dump: member=score, sorted.
func zsetText(z map[string]float64) []string {
	out := make([]string, 0, len(z))
	for m, s := range z {
		out = append(out, strconv.Quote(m)+"="+formatScore(s))
	}
	sort.Strings(out)
	return out
}
