package sim

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// luaEngine runs scripts on one node with the conversion rules of Redis.
type luaEngine struct {
	L       *lua.LState
	protos  map[string]*lua.FunctionProto // by SHA1 of the source
	node    *Node
	failure *Reply // the error reply of a failed redis.call, to abort with
}

// SHA1 returns the script id Redis gives src (for EVALSHA).
func SHA1(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}

// Eval runs the Lua script src with KEYS and ARGV, atomically, as EVAL does.
// Errors — a compile error, an error raised by redis.call, a runtime
// error — come back as error replies.
func (n *Node) Eval(src string, keys, args []string) Reply {
	n.Calls++
	if n.lua == nil {
		n.lua = newLuaEngine(n)
	}
	return n.lua.eval(src, keys, args)
}

// EvalSHA runs a script loaded before by Eval or ScriptLoad, or answers
// NOSCRIPT.
func (n *Node) EvalSHA(sha string, keys, args []string) Reply {
	if n.lua == nil || n.lua.protos[strings.ToLower(sha)] == nil {
		n.Calls++
		return errReply("NOSCRIPT No matching script. Please use EVAL.")
	}
	n.Calls++
	return n.lua.run(n.lua.protos[strings.ToLower(sha)], keys, args)
}

// ScriptLoad compiles src and returns its SHA1.
func (n *Node) ScriptLoad(src string) (string, Reply) {
	if n.lua == nil {
		n.lua = newLuaEngine(n)
	}
	sha, err := n.lua.compile(src)
	if err != nil {
		return "", errReply("ERR Error compiling script " + err.Error())
	}
	return sha, okReply()
}

func newLuaEngine(n *Node) *luaEngine {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	for _, lib := range []struct {
		name string
		fn   lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		L.Push(L.NewFunction(lib.fn))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	e := &luaEngine{L: L, protos: make(map[string]*lua.FunctionProto), node: n}
	redis := L.NewTable()
	L.SetField(redis, "call", L.NewFunction(func(L *lua.LState) int { return e.call(L, false) }))
	L.SetField(redis, "pcall", L.NewFunction(func(L *lua.LState) int { return e.call(L, true) }))
	L.SetField(redis, "error_reply", L.NewFunction(func(L *lua.LState) int {
		t := L.NewTable()
		L.SetField(t, "err", lua.LString(L.CheckString(1)))
		L.Push(t)
		return 1
	}))
	L.SetField(redis, "status_reply", L.NewFunction(func(L *lua.LState) int {
		t := L.NewTable()
		L.SetField(t, "ok", lua.LString(L.CheckString(1)))
		L.Push(t)
		return 1
	}))
	L.SetGlobal("redis", redis)
	return e
}

func (e *luaEngine) compile(src string) (string, error) {
	sha := SHA1(src)
	if e.protos[sha] != nil {
		return sha, nil
	}
	// Redis reads a first line "#!lua flags=..." as the script's flags,
	// not as Lua; the flags change nothing the simulator models, so the
	// line becomes a comment (which keeps the line numbers of errors).
	body := src
	if strings.HasPrefix(body, "#!") {
		body = "--" + body
	}
	fn, err := e.L.LoadString(body)
	if err != nil {
		return "", err
	}
	e.protos[sha] = fn.Proto
	return sha, nil
}

func (e *luaEngine) eval(src string, keys, args []string) Reply {
	sha, err := e.compile(src)
	if err != nil {
		return errReply("ERR Error compiling script " + err.Error())
	}
	return e.run(e.protos[sha], keys, args)
}

func (e *luaEngine) run(proto *lua.FunctionProto, keys, args []string) Reply {
	L := e.L
	L.SetGlobal("KEYS", strTable(L, keys))
	L.SetGlobal("ARGV", strTable(L, args))
	e.failure = nil
	L.Push(L.NewFunctionFromProto(proto))
	if err := L.PCall(0, 1, nil); err != nil {
		L.SetTop(0)
		if e.failure != nil {
			return *e.failure
		}
		return errReply("ERR user_script: " + err.Error())
	}
	ret := L.Get(-1)
	L.SetTop(0)
	return fromLua(ret)
}

func strTable(L *lua.LState, xs []string) *lua.LTable {
	t := L.CreateTable(len(xs), 0)
	for i, x := range xs {
		t.RawSetInt(i+1, lua.LString(x))
	}
	return t
}

// call is redis.call (raise on error) and redis.pcall (return the error).
func (e *luaEngine) call(L *lua.LState, protected bool) int {
	n := L.GetTop()
	if n == 0 {
		L.RaiseError("Please specify at least one argument for this redis lib call")
	}
	args := make([]string, n)
	for i := 1; i <= n; i++ {
		switch v := L.Get(i).(type) {
		case lua.LString:
			args[i-1] = string(v)
		case lua.LNumber:
			args[i-1] = formatLuaNumber(float64(v))
		default:
			L.RaiseError("Lua redis lib command arguments must be strings or integers")
		}
	}
	if strings.EqualFold(args[0], "EVAL") || strings.EqualFold(args[0], "EVALSHA") {
		L.RaiseError("This Redis command is not allowed from script")
	}
	r := e.node.Do(args...)
	if r.IsError() && !protected {
		e.failure = &r
		L.RaiseError("%s", r.Str)
	}
	L.Push(toLua(L, r))
	return 1
}

// formatLuaNumber renders a Lua number as Redis does for command arguments
// (integers without a decimal point).
func formatLuaNumber(f float64) string {
	if f == float64(int64(f)) {
		return strings.TrimSuffix(lua.LNumber(f).String(), ".0")
	}
	return lua.LNumber(f).String()
}

// toLua converts a reply the way Redis hands it to a script.
func toLua(L *lua.LState, r Reply) lua.LValue {
	switch r.Kind {
	case ReplyInt:
		return lua.LNumber(r.Int)
	case ReplyBulk:
		return lua.LString(r.Str)
	case ReplyNil:
		return lua.LFalse
	case ReplyStatus:
		t := L.NewTable()
		L.SetField(t, "ok", lua.LString(r.Str))
		return t
	case ReplyError:
		t := L.NewTable()
		L.SetField(t, "err", lua.LString(r.Str))
		return t
	}
	t := L.CreateTable(len(r.Array), 0)
	for i, x := range r.Array {
		t.RawSetInt(i+1, toLua(L, x))
	}
	return t
}

// fromLua converts a script's return value the way Redis replies with it.
func fromLua(v lua.LValue) Reply {
	switch v := v.(type) {
	case lua.LNumber:
		return intReply(int64(v))
	case lua.LString:
		return bulkReply(string(v))
	case lua.LBool:
		if v {
			return intReply(1)
		}
		return nilReply()
	case *lua.LTable:
		if s, ok := v.RawGetString("err").(lua.LString); ok {
			return errReply(string(s))
		}
		if s, ok := v.RawGetString("ok").(lua.LString); ok {
			return statusReply(string(s))
		}
		var out []Reply
		for i := 1; ; i++ {
			x := v.RawGetInt(i)
			if x == lua.LNil {
				break
			}
			out = append(out, fromLua(x))
		}
		return arrayReply(out...)
	}
	return nilReply()
}
