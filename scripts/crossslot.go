package scripts

import (
	"strconv"
	"strings"
)

// NotServed is the entry of CrossSlot's reply for a key the node that ran
// it does not serve (its slot is elsewhere, or on the move and the key
// already gone): nothing was done for that key there.
const NotServed = -1

// crossSlotHead declares the variant's flags. allow-cross-slot-keys lets it
// touch keys of every slot its node serves; allow-oom keeps a renewal
// running when the server is over maxmemory, as a script without flags does
// (its writes only extend TTLs or drop dead fields).
const crossSlotHead = "#!lua flags=allow-cross-slot-keys,allow-oom\n"

// CrossSlot returns the variant of a batch script of the renewal shape
// (KEYS[i] with ARGV[2i-1], ARGV[2i]; one reply entry per key) that one Redis
// Cluster node runs for keys of several of its slots: the renewals of a
// round batched per node rather than per slot (Redis 7.0 or later).
//
// Redis refuses a call whose declared keys span slots (CROSSSLOT) even from
// a script with allow-cross-slot-keys, which only frees the keys a script
// touches without declaring them. So the variant declares none: its ARGV is
// CrossSlotArgs, and it rebuilds KEYS and ARGV for src's body. Before the
// body, each key is probed with PTTL under redis.pcall: a key the node does
// not serve gets NotServed, and the body runs on the others only. A key
// served here whose companion keys are not (a slot half migrated) fails the
// whole call: the caller sends such a call's keys again by slot.
//
// A shebang line of src (a body that declares its own flags) is dropped:
// the variant's flags are the ones above.
func CrossSlot(src string) string {
	if strings.HasPrefix(src, "#!") {
		if i := strings.IndexByte(src, '\n'); i >= 0 {
			src = src[i+1:]
		} else {
			src = ""
		}
	}
	return crossSlotHead + `local n = tonumber(ARGV[1])
local keys, argv, at, out = {}, {}, {}, {}
for i = 1, n do
  local k = ARGV[1 + i]
  local probe = redis.pcall('pttl', k)
  if type(probe) == 'table' and probe.err then
    out[i] = ` + strconv.Itoa(NotServed) + `
  else
    local j = #keys + 1
    keys[j], at[j] = k, i
    argv[2 * j - 1], argv[2 * j] = ARGV[n + 2 * i], ARGV[n + 2 * i + 1]
  end
end
if #keys > 0 then
  local got = (function(KEYS, ARGV)
` + src + `
  end)(keys, argv)
  for j = 1, #keys do out[at[j]] = got[j] end
end
return out
`
}

// CrossSlotArgs returns the ARGV of CrossSlot's variant for c: the number
// of keys, the keys, then c's own arguments.
func CrossSlotArgs(c Call) []string {
	out := make([]string, 0, 1+len(c.Keys)+len(c.Args))
	out = append(out, strconv.Itoa(len(c.Keys)))
	out = append(out, c.Keys...)
	return append(out, c.Args...)
}
