package scripts_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
)

// TestCrossSlotAnswersAsTheScript: on one server (which serves every key),
// the cross-slot variant of each renewal script gives the reply the script
// gives for the same holds and leaves the same TTLs, keys passed in ARGV.
func TestCrossSlotAnswersAsTheScript(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	do := func(args ...string) {
		t.Helper()
		if err := c.Do(ctx, c.B().Arbitrary(args...).Build()).Error(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	for _, s := range []*scripts.Script{scripts.RenewScript, scripts.RWRenewScript, scripts.SemRenewScript, scripts.RedissonRWRenewScript} {
		cross := scripts.CrossSlot(s.Src)
		if !strings.HasPrefix(cross, "#!lua flags=allow-cross-slot-keys") {
			t.Fatalf("%s: variant starts %.40q", s.Name, cross)
		}
		var got [2][]int64
		var ttls [2][]int64
		for round, src := range []string{s.Src, cross} {
			do("FLUSHALL")
			// Two live holds (fields f1, f3) and a name nobody holds.
			for _, name := range []string{"a", "c"} {
				key := scripts.LockKey(name)
				if s == scripts.RedissonRWRenewScript {
					key = name
				}
				if s == scripts.RenewScript {
					// The reentrant lock's key is a string: one holder each.
					holder := map[string]string{"a": "f1", "c": "f3"}[name]
					do("SET", key, scripts.Hold{Field: holder, Count: 1, Token: 1}.String(), "PX", "500")
				} else {
					do("HSET", key, "f1", "1", "f3", "1", "kind", "semaphore")
					do("PEXPIRE", key, "500")
				}
				if s.HoldKey != nil && s.RenewedKey(name, "f1") != key {
					do("SET", s.RenewedKey(name, "f1"), "1", "PX", "500")
					do("SET", s.RenewedKey(name, "f3"), "1", "PX", "500")
				}
			}
			keyOf := func(name string) string {
				if s == scripts.RedissonRWRenewScript {
					return name
				}
				return scripts.LockKey(name)
			}
			call := scripts.Call{Script: s, Keys: []string{keyOf("a"), keyOf("b"), keyOf("c")},
				Args: []string{"f1", "10000", "f2", "10000", "f3", "10000"}}
			if round == 0 {
				got[round] = run(t, c, src, call.Keys, call.Args...)
			} else {
				got[round] = run(t, c, src, nil, scripts.CrossSlotArgs(call)...)
			}
			for _, k := range call.Keys {
				v, _ := c.Do(ctx, c.B().Pttl().Key(k).Build()).AsInt64()
				ttls[round] = append(ttls[round], (v+500)/1000) // seconds: the calls are ms apart
			}
		}
		if !slices.Equal(got[0], got[1]) || !slices.Equal(ttls[0], ttls[1]) {
			t.Errorf("%s: script %v (TTLs %v), cross-slot variant %v (TTLs %v)", s.Name, got[0], ttls[0], got[1], ttls[1])
		}
		if !slices.Contains(got[0], 1) {
			t.Errorf("%s: renewed nothing (%v): the case checks nothing", s.Name, got[0])
		}
	}
}

// TestCrossSlotDropsAShebang: a body with flags of its own keeps the
// variant's flags line first, and its own line is gone.
func TestCrossSlotDropsAShebang(t *testing.T) {
	v := scripts.CrossSlot("#!lua flags=no-writes\nreturn {}\n")
	if strings.Count(v, "#!") != 1 || !strings.HasPrefix(v, "#!lua flags=allow-cross-slot-keys") {
		t.Fatalf("variant:\n%s", v)
	}
}
