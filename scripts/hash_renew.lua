-- hash_renew: extend the leases of many holds kept as a field of a hash (the
-- watchdog's batch for the fair lock, and for the Redisson layout's lock).
--
-- KEYS[i]      lock hash of hold i
-- ARGV[2i-1]   owner field of hold i
-- ARGV[2i]     lease of hold i in milliseconds
--
-- Reply: an array with one entry per key, 1 when the owner still holds the lock
-- and its TTL is now at least the lease, 0 when the owner holds nothing there
-- (a key of another type, such as a reentrant lock's string, holds no field:
-- redis.pcall). The TTL is only ever extended, never shortened.
local out = {}
for i = 1, #KEYS do
  local field = ARGV[2 * i - 1]
  local lease = tonumber(ARGV[2 * i])
  if redis.pcall('hexists', KEYS[i], field) == 1 then
    if redis.call('pttl', KEYS[i]) < lease then redis.call('pexpire', KEYS[i], lease) end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
