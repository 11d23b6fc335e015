-- redisson_fence_raise: raise RFencedLock's token counter of a name to a
-- floor (RedLock over Clients with LayoutRedisson; fence_raise.lua's twin).
--
-- KEYS[1]  redisson_lock_token:{NAME}
-- ARGV[1]  the floor, a decimal
--
-- Reply: the counter after the call.
local cur = tonumber(redis.call('get', KEYS[1]) or '0')
if cur < tonumber(ARGV[1]) then
  redis.call('set', KEYS[1], ARGV[1])
  return tonumber(ARGV[1])
end
return cur
