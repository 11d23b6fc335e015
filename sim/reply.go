package sim

import (
	"strconv"
	"strings"
)

// Redis replies, as the simulated nodes give them.

// ReplyKind tells what a Reply holds.
type ReplyKind uint8

// Reply kinds, as in the Redis protocol.
const (
	ReplyNil ReplyKind = iota
	ReplyInt
	ReplyBulk
	ReplyStatus
	ReplyError
	ReplyArray
)

// Reply is a Redis reply.
type Reply struct {
	Kind  ReplyKind
	Int   int64
	Str   string // bulk, status or error text
	Array []Reply
}

func intReply(n int64) Reply { return Reply{Kind: ReplyInt, Int: n} }

func bulkReply(s string) Reply { return Reply{Kind: ReplyBulk, Str: s} }

func statusReply(s string) Reply { return Reply{Kind: ReplyStatus, Str: s} }

func errReply(s string) Reply { return Reply{Kind: ReplyError, Str: s} }

func arrayReply(a ...Reply) Reply { return Reply{Kind: ReplyArray, Array: a} }

func (r Reply) IsError() bool { return r.Kind == ReplyError }

func (r Reply) Err() error { return replyError(r.Str) }

func okReply() Reply { return statusReply("OK") }

func nilReply() Reply { return Reply{Kind: ReplyNil} }

func wrongType() Reply { return errReply(errWrongType) }

func syntaxErr() Reply { return errReply("ERR syntax error") }

func notInt() Reply { return errReply("ERR value is not an integer or out of range") }

func arity(cmd string) Reply {
	return errReply("ERR wrong number of arguments for '" + strings.ToLower(cmd) + "' command")
}

func (r Reply) String() string { return r.format() }

func (k ReplyKind) String() string {
	return [...]string{"nil", "int", "bulk", "status", "error", "array"}[k]
}

// replyError is an error reply of the simulated Redis.
type replyError string

func (e replyError) Error() string { return string(e) }

func (r Reply) format() string {
	switch r.Kind {
	case ReplyNil:
		return "(nil)"
	case ReplyInt:
		return "(integer) " + strconv.FormatInt(r.Int, 10)
	case ReplyBulk:
		return strconv.Quote(r.Str)
	case ReplyStatus:
		return r.Str
	case ReplyError:
		return "(error) " + r.Str
	}
	parts := make([]string, len(r.Array))
	for i, e := range r.Array {
		parts[i] = e.format()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
