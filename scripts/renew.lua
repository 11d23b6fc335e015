-- renew: extend the leases of many holds in one call (the watchdog's batch).
--
-- KEYS[i]      lock key of hold i (layout in acquire.lua)
-- ARGV[2i-1]   owner field of hold i
-- ARGV[2i]     lease of hold i in milliseconds
--
-- Reply: an array with one entry per key, 1 when the owner still holds the lock
-- and its TTL is now at least the lease, 0 when the owner holds nothing there
-- (the key is gone, another owner's, or in use as another kind). The TTL is
-- only ever extended, never shortened (PEXPIRE GT).
local out = {}
for i = 1, #KEYS do
  local v = redis.pcall('get', KEYS[i])
  if type(v) == 'table' and string.sub(v.err, 1, 9) ~= 'WRONGTYPE' then return v end
  out[i] = 0
  if type(v) == 'string' and string.match(v, '^w?%d+:%d+:(.*)$') == ARGV[2 * i - 1] then
    redis.call('pexpire', KEYS[i], ARGV[2 * i], 'gt')
    out[i] = 1
  end
end
return out
