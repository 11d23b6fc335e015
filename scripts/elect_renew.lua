-- elect_renew: extend the leases of many leaders in one call (the
-- watchdog's batch for elections; layout in elect_acquire.lua).
--
-- KEYS[i]      election hash of hold i: holdfast:{NAME}
-- ARGV[2i-1]   owner field of hold i
-- ARGV[2i]     lease of hold i in milliseconds
--
-- Reply: one entry per key, 1 when the owner still leads and the TTL is
-- now at least the lease, 0 when it does not lead there. The TTL is only
-- ever extended. A key that is not a hash (another kind's) answers 0.
local out = {}
for i = 1, #KEYS do
  local key, f = KEYS[i], ARGV[2 * i - 1]
  local lease = tonumber(ARGV[2 * i])
  local got = redis.pcall('hmget', key, 'kind', 'owner')
  out[i] = 0
  if not got.err and got[1] == 'election' and got[2] == f then
    if redis.call('pttl', key) < lease then redis.call('pexpire', key, lease) end
    out[i] = 1
  end
end
return out
