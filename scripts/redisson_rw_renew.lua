-- redisson_rw_renew: extend the leases of many read and write holds of locks
-- kept as Redisson keeps an RReadWriteLock, in one call (the watchdog's batch;
-- layout in redisson_rw_acquire.lua).
--
-- KEYS[i]      lock hash of hold i: NAME
-- ARGV[2i-1]   hold field of hold i: ID:THREAD (read) or ID:THREAD:write
-- ARGV[2i]     lease of hold i in milliseconds
--
-- Reply: one entry per key, 1 when the hold is still there and its leases
-- now last at least the lease, 0 when it is gone. As Redisson's watchdogs: a
-- write hold extends the hash; a read hold extends each of its own timeout
-- keys and the hash. Only extended, never cut: a Java holder's longer TTL is
-- left as it is.
local out = {}
for i = 1, #KEYS do
  local key, f = KEYS[i], ARGV[2 * i - 1]
  local lease = tonumber(ARGV[2 * i])
  local n = tonumber(redis.call('hget', key, f) or '0')
  out[i] = 0
  if n and n > 0 then
    if string.sub(f, -6) ~= ':write' then
      local kp = '{' .. key .. '}'
      if string.find(key, '{', 1, true) then kp = key end
      for j = 1, n do
        local tk = kp .. ':' .. f .. ':rwlock_timeout:' .. j
        local t = redis.call('pttl', tk)
        if t >= 0 and t < lease then redis.call('pexpire', tk, lease) end
      end
    end
    local t = redis.call('pttl', key)
    if t >= 0 and t < lease then redis.call('pexpire', key, lease) end
    out[i] = 1
  end
end
return out
