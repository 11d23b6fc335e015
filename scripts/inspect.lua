-- inspect: read the reentrant lock at KEYS[1] in one step, for Client.Inspect.
--
-- KEYS[1]  lock hash  holdfast:{NAME}  field CLIENTID:INSTANCE:OWNER -> reentry count
--
-- Reply: {pttl, field1, count1, field2, count2, ...}. pttl is the key's PTTL
-- (-2 when the name is free, -1 when the key has no expiry); the pairs are
-- the holders. Reading both in one script keeps the TTL and the holders from
-- the same moment.
local out = {redis.call('pttl', KEYS[1])}
if out[1] == -2 then return out end
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields do out[i + 1] = fields[i] end
return out
