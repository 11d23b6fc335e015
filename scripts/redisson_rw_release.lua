-- redisson_rw_release: give back one reentry of an owner's read or write
-- hold of a lock kept as Redisson keeps an RReadWriteLock, or all of it
-- (layout in redisson_rw_acquire.lua).
--
-- KEYS[1]  lock hash        NAME
-- KEYS[2]  channel          redisson_rwlock:{NAME}
-- KEYS[3]  reader timeouts  the owner's timeout-key prefix (read holds)
-- ARGV[1]  hold field       ID:THREAD or ID:THREAD:write
-- ARGV[2]  the count the caller believes the owner holds in this mode before
--          this release; 0 removes the hold whatever its count (abandon)
-- ARGV[3]  "r" or "w"
--
-- Replies (as release.lua): the count after the release, -1 (not held),
-- -2 (another count).
--
-- As Redisson's unlocks: a read hold's release deletes its newest timeout
-- key; the last read hold of the name deletes the hash and publishes 0 on the
-- channel; while other readers remain, the hash lives as long as the longest
-- of their timeout keys (a reader whose keys all expired keeps no one out).
-- A write hold's release deletes the hash and publishes 1 (Redisson's read
-- unlock message, which wakes every waiting reader), unless the owner still
-- reads: then the name becomes a read lock, and nothing is published.
local key, f, pfx = KEYS[1], ARGV[1], KEYS[3]
local expected, mode = tonumber(ARGV[2]), ARGV[3]
local v = redis.call('hget', key, f)
if not v then return -1 end
local count = tonumber(v)
if expected ~= 0 and count ~= expected then
  if count == expected - 1 then return count end
  return -2
end
if expected ~= 0 and count > 1 then
  local left = redis.call('hincrby', key, f, -1)
  if mode == 'r' then redis.call('del', pfx .. ':' .. (left + 1)) end
  return left
end
redis.call('hdel', key, f)
if mode == 'w' then
  if redis.call('hlen', key) <= 1 then
    redis.call('del', key)
    redis.call('publish', KEYS[2], 1)
  else
    redis.call('hset', key, 'mode', 'read')
  end
  return 0
end
for i = 1, count do redis.call('del', pfx .. ':' .. i) end
if redis.call('hlen', key) > 1 then
  -- The other readers' timeout keys: KP:FIELD:rwlock_timeout:i, where KP
  -- is {NAME} (or NAME when it holds a '{').
  local kp = '{' .. key .. '}'
  if string.find(key, '{', 1, true) then kp = key end
  local longest = -3
  local all = redis.call('hgetall', key)
  for i = 1, #all, 2 do
    local n = tonumber(all[i + 1])
    if all[i] ~= 'mode' and n then
      for j = n, 1, -1 do
        longest = math.max(longest, redis.call('pttl', kp .. ':' .. all[i] .. ':rwlock_timeout:' .. j))
      end
    end
  end
  if longest > 0 then
    redis.call('pexpire', key, longest)
    return 0
  end
  if redis.call('hget', key, 'mode') == 'write' then return 0 end
end
redis.call('del', key)
redis.call('publish', KEYS[2], 0)
return 0
