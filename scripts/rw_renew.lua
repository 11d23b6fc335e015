-- rw_renew: extend the leases of many read-write holds in one call (the
-- watchdog's batch for the read-write kind; layout in rw_acquire.lua).
--
-- KEYS[i]      lock hash of hold i: holdfast:{NAME}
-- ARGV[2i-1]   hold field of hold i, FIELD: "CLIENTID:INSTANCE:OWNER:r" (read) or
--              "CLIENTID:INSTANCE:OWNER:w" (write); the hold's own lease key is
--              KEYS[i]..':rw:'..FIELD (same hash slot)
-- ARGV[2i]     lease of hold i in milliseconds
--
-- Reply: an array with one entry per key, 1 when the hold is live and its own
-- lease key's TTL is now at least the lease, 0 when the hold is gone (its
-- field is then removed). Only the hold's own lease key is extended, so the
-- renewals of live readers never extend a crashed reader's hold; the hash's
-- TTL is raised to cover the renewed lease, never lowered.
local out = {}
for i = 1, #KEYS do
  local key, f = KEYS[i], ARGV[2 * i - 1]
  local lease = tonumber(ARGV[2 * i])
  local lk = key .. ':rw:' .. f
  out[i] = 0
  -- pcall: a reentrant lock's key is a string (WRONGTYPE): the hold is gone.
  if redis.pcall('hexists', key, f) == 1 then
    local ttl = redis.call('pttl', lk)
    if ttl == -2 then
      redis.call('hdel', key, f)
    else
      if ttl >= 0 and ttl < lease then redis.call('pexpire', lk, lease) end
      local kt = redis.call('pttl', key)
      if kt >= 0 and kt < lease then redis.call('pexpire', key, lease) end
      out[i] = 1
    end
  end
end
return out
