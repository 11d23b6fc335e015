-- force_unlock: free the reentrant lock at KEYS[1] whoever holds it
-- (Client.ForceUnlock, an operator's tool).
--
-- KEYS[1]  lock key       holdfast:{NAME} (layout in acquire.lua)
-- KEYS[2]  fence counter  scripts.FenceKey(NAME)
-- ARGV[1]  the lock's pub/sub channel
--
-- Reply: 1 when a hold was removed, 0 when the name was free or in use as
-- another kind (nothing changed).
--
-- The fence goes up so that any token the old holder hands out from now on is
-- lower than the next grant's, and a resource that saw this bump's value can
-- refuse it at once. The old holder learns of the removal at its next renewal
-- (its hold is gone) and ends with Lost. Waiters are told, as on a release.
local v = redis.pcall('get', KEYS[1])
if type(v) == 'table' and string.sub(v.err, 1, 9) ~= 'WRONGTYPE' then return v end
if type(v) ~= 'string' then return 0 end
if not string.match(v, '^w?%d+:%d+:') then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds a string no holdfast script wrote')
end
redis.call('del', KEYS[1])
fence_take(KEYS[2])
redis.call('publish', ARGV[1], 'released')
return 1
