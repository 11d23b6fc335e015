-- sem_renew: extend the leases of many permits in one call (the watchdog's
-- batch for semaphores; layout in sem_acquire.lua).
--
-- KEYS[i]      lock hash of permit i: holdfast:{NAME}
-- ARGV[2i-1]   owner field of permit i; its lease key is KEYS[i]..':sem:'..FIELD
-- ARGV[2i]     lease of permit i in milliseconds
--
-- Reply: one entry per key, 1 when the permit is live and its own lease key's
-- TTL is now at least the lease, 0 when it is gone (its field is then
-- removed). Only the permit's own lease key is extended, so live holders'
-- renewals never keep a crashed holder's permit; the hash's TTL is raised to
-- cover the renewed lease, never lowered.
local out = {}
for i = 1, #KEYS do
  local key, f = KEYS[i], ARGV[2 * i - 1]
  local lease = tonumber(ARGV[2 * i])
  local lk = key .. ':sem:' .. f
  out[i] = 0
  -- pcall: a reentrant lock's key is a string (WRONGTYPE): the permit is gone.
  if redis.pcall('hget', key, 'kind') == 'semaphore' and redis.call('hexists', key, f) == 1 then
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
