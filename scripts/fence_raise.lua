-- fence_raise: raise the fencing counter of a name to at least a floor.
--
-- KEYS[1]  fence counter  scripts.FenceKey(NAME)  the counter the acquire script INCRs
-- ARGV[1]  floor T        the highest token a RedLock majority returned
--
-- Reply: the counter after the call (>= T).
--
-- A RedLock holder raises the counter on every node that granted it, so that
-- the next grant on any of those nodes returns more than T, whatever its own
-- counter said before. The counter is only ever raised, never lowered, so the
-- call is idempotent and safe to repeat after a timeout. This is the one place
-- that knows how the counter is stored: if its layout changes, only this
-- script (and scripts.FenceKey) change.
local floor = tonumber(ARGV[1])
local cur = tonumber(redis.call('get', KEYS[1]) or '0')
if cur < floor then
  redis.call('set', KEYS[1], ARGV[1])
  return floor
end
return cur
