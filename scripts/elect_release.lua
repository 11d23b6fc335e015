-- elect_release: give back one reentry of the leadership of the election at
-- KEYS[1], or all of it: resign (layout in elect_acquire.lua).
--
-- KEYS[1]  election hash  holdfast:{NAME}
-- ARGV[1]  owner field    CLIENTID:INSTANCE:OWNER
-- ARGV[2]  the count the caller believes the owner holds before this
--          release; 0 resigns whatever the count
-- ARGV[3]  the election's pub/sub channel
--
-- Replies (as release.lua's):
--   n >= 0  the owner's count after the release; 0: it resigned
--   -1      the owner does not lead (expired, taken over, or a retry of a
--           resignation that already ran); nothing changed
--   -2      the owner's count is not what the caller believes; nothing changed
--
-- A resignation deletes the hash and tells the channel "vacant:TERM" (TERM:
-- the term that ended), whoever listens: observers learn of the vacancy and
-- waiting candidates try at once. An expiry publishes nothing (Redis does
-- not); observers and candidates learn of it at the leader's PTTL.
local key, f = KEYS[1], ARGV[1]
local expected = tonumber(ARGV[2])
local got = redis.pcall('hmget', key, 'kind', 'owner', 'count', 'term')
if got.err or got[1] ~= 'election' or got[2] ~= f then return -1 end
local count = tonumber(got[3] or '0')
if expected ~= 0 and count ~= expected then
  if count == expected - 1 then return count end
  return -2
end
if expected ~= 0 and count > 1 then
  return redis.call('hincrby', key, 'count', -1)
end
redis.call('del', key)
redis.call('publish', ARGV[3], 'vacant:' .. (got[4] or '0'))
return 0
