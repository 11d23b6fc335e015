-- release: give back one reentry of an owner's hold, or all of it.
--
-- KEYS[1]  lock hash  holdfast:{NAME}
-- KEYS[2]  waiter mark  holdfast:{NAME}:w, set by acquire.lua when it refuses
-- ARGV[1]  owner field  CLIENTID:INSTANCE:OWNER
-- ARGV[2]  the count the caller believes the owner holds before this release;
--          0 removes the owner's field whatever its count (abandon)
-- ARGV[3]  the lock's pub/sub channel, told when the lock becomes free and
--          someone waits: the waiter mark lives, or ARGV[4] is "1"
-- ARGV[4]  "1" when the caller has waiters of its own on the name (they listen
--          for this release); "0" otherwise
--
-- Replies:
--   n >= 0  the owner's count after the release; 0 means the owner holds nothing
--   -1      the owner holds nothing here (expired, deleted, taken over, or a
--           retry of a final release that already ran); nothing changed
--   -2      the owner's count is not what the caller believes; nothing changed
--
-- A retry of a release that already ran (count is expected - 1) changes nothing
-- and answers the same count again, so releases are safe to repeat.
local v = redis.call('hget', KEYS[1], ARGV[1])
if not v then return -1 end
local count = tonumber(v)
local expected = tonumber(ARGV[2])

if expected ~= 0 and count ~= expected then
  if count == expected - 1 then return count end
  return -2
end

local left = 0
if expected ~= 0 and count > 1 then
  left = redis.call('hincrby', KEYS[1], ARGV[1], -1)
else
  redis.call('hdel', KEYS[1], ARGV[1])
  -- Nobody waits and the lock is free (the common case) when neither key is
  -- there: one EXISTS tells, and nothing is published.
  local n = 1
  if ARGV[4] ~= '1' then n = redis.call('exists', KEYS[1], KEYS[2]) end
  if n > 0 and redis.call('exists', KEYS[1]) == 0 then
    redis.call('publish', ARGV[3], 'released')
  end
end
return left
