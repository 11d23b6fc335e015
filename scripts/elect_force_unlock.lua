-- elect_force_unlock: end the leadership of the election at KEYS[1] whoever
-- leads (Client.ForceUnlock, an operator's tool; layout in elect_acquire.lua).
--
-- KEYS[1]  election hash  holdfast:{NAME}
-- KEYS[2]  fence counter  scripts.FenceKey(NAME) (see fence.lua)
-- ARGV[1]  the election's pub/sub channel
--
-- Reply: 1 when a leader was removed, 0 when nobody led or the name is in
-- use as another kind (nothing changed).
--
-- As force_unlock.lua: the fence goes up so that the old leader's term is
-- stale at once, and the vacancy is announced as a resignation's is. The old
-- leader ends with Lost at its next renewal.
local got = redis.pcall('hmget', KEYS[1], 'kind', 'term')
if got.err or got[1] ~= 'election' then return 0 end
redis.call('del', KEYS[1])
fence_take(KEYS[2])
redis.call('publish', ARGV[1], 'vacant:' .. (got[2] or '0'))
return 1
