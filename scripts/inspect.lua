-- inspect: read the reentrant lock at KEYS[1] in one step, for Client.Inspect.
--
-- KEYS[1]  lock key  holdfast:{NAME} (layout in acquire.lua)
--
-- Reply: {pttl, field, count}. pttl is the key's PTTL (-1 when the key has
-- no expiry); field and count are the holder's. {-2} when the name is not
-- held as a reentrant lock: free, or its key is another kind's hash.
-- Reading both in one script keeps the TTL and the holder from the same moment.
local v = redis.pcall('get', KEYS[1])
if type(v) == 'table' and string.sub(v.err, 1, 9) ~= 'WRONGTYPE' then return v end
if type(v) ~= 'string' then return {-2} end
local _, count, _, owner = string.match(v, '^(w?)(%d+):(%d+):(.*)$')
if not owner then return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds a string no holdfast script wrote') end
return {redis.call('pttl', KEYS[1]), owner, count}
