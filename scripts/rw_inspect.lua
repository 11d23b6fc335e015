-- rw_inspect: read the read-write lock at KEYS[1] in one step, for
-- Client.Inspect (layout in rw_acquire.lua).
--
-- KEYS[1]  lock hash  holdfast:{NAME}
--
-- Reply: {-3} when the name is not in use as a read-write lock; else
-- {pttl, field1, count1, field2, count2, ...}: the hash's PTTL, then every
-- live hold and claim (CLIENTID:INSTANCE:OWNER:r, :w or :c) whose own lease key still
-- exists. A dead hold whose lease ran out is not shown, though its field may
-- linger until the next script prunes it.
-- pcall: a reentrant lock's key is a string (WRONGTYPE): not ours.
if redis.pcall('hget', KEYS[1], 'kind') ~= 'rw' then return {-3} end
local out = {redis.call('pttl', KEYS[1])}
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields, 2 do
  if fields[i] ~= 'kind' and redis.call('exists', KEYS[1] .. ':rw:' .. fields[i]) == 1 then
    out[#out + 1] = fields[i]
    out[#out + 1] = fields[i + 1]
  end
end
return out
