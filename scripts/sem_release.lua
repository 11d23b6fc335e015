-- sem_release: give back one reentry of an owner's permit, or all of it, on
-- the semaphore at KEYS[2] (layout in sem_acquire.lua).
--
-- KEYS[1]  lease key  holdfast:{NAME}:sem:FIELD
-- KEYS[2]  lock hash  holdfast:{NAME}
-- ARGV[1]  owner field  CLIENTID:INSTANCE:OWNER
-- ARGV[2]  the count the caller believes the owner holds before this
--          release; 0 gives the permit up whatever its count (abandon)
-- ARGV[3]  the semaphore's pub/sub channel
--
-- Replies (as release.lua):
--   n >= 0  the owner's count after the release
--   -1      the owner holds no permit here; nothing changed
--   -2      the owner's count is not what the caller believes; nothing changed
--
-- A release that frees the permit tells the channel "released" once: one
-- waiter of each process that waits tries again. It reads no other permit.
local lk, key, f = KEYS[1], KEYS[2], ARGV[1]
local expected = tonumber(ARGV[2])
local pfx = key .. ':sem:'
if #f == 0 or lk ~= pfx .. f then
  return redis.error_reply('ERR sem_release: KEYS[1] must be the field\'s lease key')
end
-- pcall: a reentrant lock's key is a string (WRONGTYPE): nothing of ours.
local got = redis.pcall('hmget', key, 'kind', f)
if got.err or got[1] ~= 'semaphore' then
  return -1
end
local v = got[2]
if v and redis.call('exists', lk) == 0 then
  redis.call('hdel', key, f)
  v = nil
end
if not v then
  return -1
end
local count = tonumber(v)
if expected ~= 0 and count ~= expected then
  if count == expected - 1 then return count end
  return -2
end
if expected ~= 0 and count > 1 then
  return redis.call('hincrby', key, f, -1)
end
redis.call('hdel', key, f)
redis.call('del', lk)

-- The hash goes with its last permit field. Its TTL is left as it is: an
-- upper bound of the live leases (dead fields are pruned by the next
-- acquire that needs to count them).
local fields = redis.call('hlen', key) - 2 - redis.call('hexists', key, 'next')
if fields <= 0 then
  redis.call('del', key)
end
redis.call('publish', ARGV[3], 'released')
return 0
