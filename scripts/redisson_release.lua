-- redisson_release: give back one reentry of an owner's hold of a lock kept
-- as Redisson keeps an RLock, or all of it (layout in redisson_acquire.lua).
--
-- KEYS[1]  lock hash  NAME
-- KEYS[2]  channel    redisson_lock__channel:{NAME} (the name as is when it holds a '{')
-- ARGV[1]  owner field  ID:THREAD
-- ARGV[2]  the count the caller believes the owner holds before this
--          release; 0 removes the owner's hold whatever its count (abandon)
--
-- Replies (as release.lua):
--   n >= 0  the owner's count after the release
--   -1      the owner holds nothing here; nothing changed
--   -2      the owner's count is not what the caller believes; nothing changed
--
-- A release that frees the lock deletes the hash and publishes Redisson's
-- unlock message, the integer 0, on the lock's channel, as Redisson's unlock
-- does: Java waiters (and holdfast's) wake. A reentry's release publishes
-- nothing and leaves the TTL as it is.
local key, f = KEYS[1], ARGV[1]
local expected = tonumber(ARGV[2])
local v = redis.call('hget', key, f)
if not v then return -1 end
local count = tonumber(v)
if expected ~= 0 and count ~= expected then
  if count == expected - 1 then return count end
  return -2
end
if expected ~= 0 and count > 1 then
  return redis.call('hincrby', key, f, -1)
end
-- The owner's field is the only one an RLock's hash holds: the hash goes,
-- as Redisson's unlock deletes it.
redis.call('del', key)
redis.call('publish', KEYS[2], 0)
return 0
