-- inspect: read the reentrant lock at KEYS[1] in one step, for Client.Inspect.
--
-- KEYS[1]  lock hash  holdfast:{NAME}  field CLIENTID:INSTANCE:OWNER -> reentry count
--
-- Reply: {pttl, field1, count1, field2, count2, ...}. pttl is the key's PTTL
-- (-1 when the key has no expiry); the pairs are the holders. {-2} when the
-- name is not held as a reentrant lock: free, or its hash carries another
-- kind's "kind" marker. Reading both in one script keeps the TTL and the
-- holders from the same moment.
local out = {redis.call('pttl', KEYS[1])}
if out[1] == -2 or redis.call('hexists', KEYS[1], 'kind') == 1 then return {-2} end
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields do out[i + 1] = fields[i] end
return out
