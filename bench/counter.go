package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// cmdCounter counts the commands that clients send, by name, by parsing the
// RESP they write on their connections. It counts what a client asks the
// server to run: an EVALSHA is one command, however many commands its script
// runs inside Redis (INFO commandstats counts those too, so it cannot tell a
// client's round trips apart from a script's work).
type cmdCounter struct {
	total    atomic.Int64
	writes   atomic.Int64 // Write calls on the connections: system calls
	evalKeys atomic.Int64 // keys named by EVAL and EVALSHA calls (their numkeys)

	mu     sync.RWMutex // guards byName's keys; counts are atomic
	byName map[string]*atomic.Int64
}

func newCounter() *cmdCounter { return &cmdCounter{byName: map[string]*atomic.Int64{}} }

func (c *cmdCounter) add(name []byte) {
	c.total.Add(1)
	c.mu.RLock()
	n := c.byName[string(name)]
	c.mu.RUnlock()
	if n == nil {
		key := strings.ToLower(string(name))
		c.mu.Lock()
		if n = c.byName[key]; n == nil {
			n = new(atomic.Int64)
			c.byName[key] = n
		}
		// Also index the spelling the client used, so the next lookup hits.
		c.byName[string(name)] = n
		c.mu.Unlock()
	}
	n.Add(1)
}

// snapshot returns the counts by lower-case command name.
func (c *cmdCounter) snapshot() map[string]int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := map[string]int64{}
	seen := map[*atomic.Int64]bool{}
	for k, v := range c.byName {
		if seen[v] || k != strings.ToLower(k) {
			continue
		}
		seen[v] = true
		out[k] = v.Load()
	}
	return out
}

func countsDelta(before, after map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for k, v := range after {
		if n := v - before[k]; n > 0 {
			d[k] = n
		}
	}
	return d
}

// handshake lists the commands clients send once per new connection.
var handshake = map[string]bool{"hello": true, "client": true, "auth": true, "select": true, "readonly": true}

// steady returns the commands of m other than connection handshakes: what a
// long-lived client with its connections already open would have sent.
func steady(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		if !handshake[k] {
			out[k] = v
		}
	}
	return out
}

// names lists the keys of a count map in a stable order.
func names(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// dialer returns a dial function for go-redis whose connections count into c.
func (c *cmdCounter) goredisDialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: conn, ctr: c}, nil
	}
}

// rueidisDialer returns a DialCtxFn for rueidis whose connections count into c.
func (c *cmdCounter) rueidisDialer() func(ctx context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
	return func(ctx context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
		conn, err := d.DialContext(ctx, "tcp", dst)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: conn, ctr: c}, nil
	}
}

// countingConn parses the RESP a client writes, one command per top-level
// array, and counts each by its first argument. Writes may split a command
// anywhere, so the parser keeps its state between writes.
type countingConn struct {
	net.Conn
	ctr *cmdCounter

	state   int   // what the next byte belongs to
	num     int64 // the number being read (array length or bulk length)
	left    int64 // bulk bytes (plus CRLF) still to skip, or elements left
	elems   int64
	first   bool // reading the first element: its bytes are the name
	name    [32]byte
	nameLen int
	idx     int64 // index of the element being read
	isEval  bool  // the command is EVAL or EVALSHA: element 2 is numkeys
	numKeys int64
}

const (
	stStart     = iota // expecting '*' (or an inline command)
	stArrayLen         // digits of *N
	stBulkStart        // expecting '$'
	stBulkLen          // digits of $N
	stBulkData         // N bytes and CRLF
	stInline           // an inline command up to '\n'
)

func (c *countingConn) Write(p []byte) (int, error) {
	c.ctr.writes.Add(1)
	c.parse(p)
	return c.Conn.Write(p)
}

// SyscallConn lets go-redis run its connection health check as it would on a
// plain TCP connection.
func (c *countingConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, syscall.EINVAL
}

func (c *countingConn) parse(p []byte) {
	for i := 0; i < len(p); i++ {
		b := p[i]
		switch c.state {
		case stStart:
			switch b {
			case '*':
				c.state, c.num = stArrayLen, 0
			case '\r', '\n':
			default:
				c.state, c.nameLen = stInline, 0
				c.name[0], c.nameLen = b, 1
			}
		case stArrayLen:
			switch {
			case b >= '0' && b <= '9':
				c.num = c.num*10 + int64(b-'0')
			case b == '\n':
				c.elems, c.first, c.idx, c.isEval = c.num, true, 0, false
				if c.elems <= 0 {
					c.state = stStart
				} else {
					c.state = stBulkStart
				}
			}
		case stBulkStart:
			if b == '$' {
				c.state, c.num = stBulkLen, 0
			}
		case stBulkLen:
			switch {
			case b >= '0' && b <= '9':
				c.num = c.num*10 + int64(b-'0')
			case b == '\n':
				c.state, c.left = stBulkData, c.num+2
				if c.first {
					c.nameLen = 0
				}
			}
		case stBulkData:
			n := min(c.left, int64(len(p)-i))
			if c.isEval && c.idx == 2 {
				for _, ch := range p[i : i+int(n)] {
					if ch >= '0' && ch <= '9' {
						c.numKeys = c.numKeys*10 + int64(ch-'0')
					}
				}
				c.left -= n
			} else if c.first {
				data := p[i : i+int(n)]
				for _, ch := range data {
					if c.nameLen < len(c.name) && c.left-2 > 0 {
						c.name[c.nameLen] = ch
						c.nameLen++
					}
					c.left--
				}
			} else {
				c.left -= n
			}
			i += int(n) - 1
			if c.left == 0 {
				if c.first {
					c.first = false
					c.ctr.add(c.name[:c.nameLen])
					nm := c.name[:c.nameLen]
					c.isEval = bytes.EqualFold(nm, []byte("evalsha")) || bytes.EqualFold(nm, []byte("eval"))
					c.numKeys = 0
				} else if c.isEval && c.idx == 2 {
					c.ctr.evalKeys.Add(c.numKeys)
				}
				c.idx++
				c.elems--
				if c.elems == 0 {
					c.state = stStart
				} else {
					c.state = stBulkStart
				}
			}
		case stInline:
			if b == '\n' {
				name := c.name[:c.nameLen]
				if k := strings.IndexByte(string(name), ' '); k >= 0 {
					name = name[:k]
				}
				c.ctr.add([]byte(strings.TrimSpace(string(name))))
				c.state = stStart
			} else if c.nameLen < len(c.name) {
				c.name[c.nameLen] = b
				c.nameLen++
			}
		}
	}
}
