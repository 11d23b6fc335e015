package sim

import (
	"testing"
	"time"

	"github.com/holdfast/holdfast/scripts"
)

// TestShebangScripts: a script whose first line declares Redis 7 flags
// runs as Redis runs it (the line is not Lua), by EVAL and by EVALSHA, and
// the cross-slot variant of the renew script answers per key as the script.
func TestShebangScripts(t *testing.T) {
	n := NewNode(func() time.Time { return t0 })
	src := "#!lua flags=allow-cross-slot-keys\nreturn 7"
	if r := n.Eval(src, nil, nil); r.Int != 7 {
		t.Fatalf("EVAL of a script with flags: %v", r)
	}
	if r := n.EvalSHA(SHA1(src), nil, nil); r.Int != 7 {
		t.Fatalf("EVALSHA of a script with flags: %v", r)
	}
	n.Do("SET", scripts.LockKey("a"), scripts.Hold{Field: "f", Count: 1, Token: 1}.String(), "PX", "100")
	c := scripts.Call{Script: scripts.RenewScript, Keys: []string{scripts.LockKey("a"), scripts.LockKey("b")}, Args: []string{"f", "5000", "f", "5000"}}
	if r := n.Eval(scripts.CrossSlot(scripts.Renew), nil, scripts.CrossSlotArgs(c)); r.String() != "[(integer) 1, (integer) 0]" {
		t.Fatalf("cross-slot renew: %v", r)
	}
	if r := n.Do("PTTL", scripts.LockKey("a")); r.Int != 5000 {
		t.Fatalf("PTTL after the cross-slot renew: %v", r)
	}
}
