-- redisson_fair_release: give back one reentry of a fair hold kept as
-- Redisson keeps an RFairLock, or all of it, or leave the line (layout in
-- redisson_fair_common.lua).
--
-- KEYS[1]  lock hash       NAME
-- KEYS[2]  line            redisson_lock_queue:{NAME}
-- KEYS[3]  deadlines       redisson_lock_timeout:{NAME}
-- KEYS[4]  channel prefix  redisson_lock__channel:{NAME}
-- ARGV[1]  owner field     ID:THREAD
-- ARGV[2]  the count the caller believes the owner holds; 0 removes the
--          owner whatever its count, and its place in the line
--
-- Replies, as release.lua's:
--   n >= 0  the owner's count after the release
--   -1      the owner holds nothing (a waiter leaving the line, or the
--           repeat of a final release)
--   -2      the owner's count is not what the caller believes
--
-- A release that frees the lock deletes the hash, drops the dead heads of
-- the line and tells the head, on its own channel, as Redisson's unlock
-- does; so does a waiter that leaves while the lock is free, so that the
-- turn it had passes on at once.
local H, L, Z, CH = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local field, expected = ARGV[1], tonumber(ARGV[2])

-- pcall: another kind's string answers WRONGTYPE; the owner holds nothing.
local v = redis.pcall('hget', H, field)
if type(v) ~= 'string' then
  if not other_kind(H, L, Z) then
    leave(L, Z, field)
    if redis.call('exists', H) == 0 then
      prune(L, Z, now_ms())
      wake(L, CH)
    end
  end
  return -1
end
local count = tonumber(v)
if expected ~= 0 and count ~= expected then
  if count == expected - 1 then return count end
  return -2
end
if expected ~= 0 and count > 1 then
  return redis.call('hincrby', H, field, -1)
end
redis.call('del', H)
leave(L, Z, field)
prune(L, Z, now_ms())
wake(L, CH)
return 0
