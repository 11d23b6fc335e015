-- fair_release: give back one reentry of a fair hold, or leave the queue;
-- when the lock becomes free, grant it to the longest-waiting live waiter.
--
-- KEYS[1]  lock hash   holdfast:{NAME}
-- KEYS[2]  fence counter (unused; keep the fair scripts' keys alike)
-- KEYS[3]  queue       holdfast:{NAME}:q
-- ARGV[1]  owner field  CLIENTID:INSTANCE:OWNER
-- ARGV[2]  the count the caller believes the owner holds; 0 removes the
--          owner whatever its count
-- ARGV[3]  WaiterTimeout in milliseconds: how long the next waiter has at
--          least to confirm its grant before the lock passes on (longer when
--          its own place has longer to live; see grant_next)
-- ARGV[4]  channel prefix  holdfast:{NAME}:ch:
--
-- Replies, as release.lua's:
--   n >= 0  the owner's count after the release (0: it holds nothing; an
--           unconfirmed grant to the owner is given up, to the next waiter)
--   -1      the owner holds nothing (a waiter leaving the queue, or a repeat
--           of a final release that already ran)
--   -2      the owner's count is not what the caller believes
--
-- The grant is made here, inside the release: the next waiter is told on
-- its own client's channel, and no other waiter wakes.
local H, Q = KEYS[1], KEYS[3]
local field, expected = ARGV[1], tonumber(ARGV[2])
local wt, chprefix = tonumber(ARGV[3]), ARGV[4]

-- pcall: a reentrant lock's key is a string; WRONGTYPE means the owner
-- holds nothing here.
local v = redis.pcall('hget', H, field)
if type(v) ~= 'string' then
  if redis.call('hdel', Q, field) == 1 and redis.call('hlen', Q) <= 1 then
    redis.call('del', Q)
  end
  return -1
end
local count = tonumber(v)
if count ~= 0 and expected ~= 0 and count ~= expected then
  if count == expected - 1 then return count end
  return -2
end
if count > 1 and expected ~= 0 then
  return redis.call('hincrby', H, field, -1)
end
redis.call('hdel', H, field)
redis.call('hdel', Q, field)
if holders(H) == 0 then
  redis.call('del', H)
  if redis.call('exists', Q) == 1 then
    grant_next(H, Q, now_ms(), wt, chprefix)
  end
end
return 0
