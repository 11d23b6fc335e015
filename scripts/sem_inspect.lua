-- sem_inspect: read the semaphore at KEYS[1] in one step, for Client.Inspect
-- (layout in sem_acquire.lua).
--
-- KEYS[1]  lock hash  holdfast:{NAME}
--
-- Reply: {-3} when the name is not in use as a semaphore; else
-- {pttl, permits, field1, count1, field2, count2, ...}: the hash's PTTL, its
-- permit count, then every live permit (a field whose lease key still exists).
-- pcall: a reentrant lock's key is a string (WRONGTYPE): not ours.
if redis.pcall('hget', KEYS[1], 'kind') ~= 'semaphore' then return {-3} end
local out = {redis.call('pttl', KEYS[1]), tonumber(redis.call('hget', KEYS[1], 'permits') or '0')}
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields, 2 do
  local f = fields[i]
  if f ~= 'kind' and f ~= 'permits' and f ~= 'next' and redis.call('exists', KEYS[1] .. ':sem:' .. f) == 1 then
    out[#out + 1] = f
    out[#out + 1] = fields[i + 1]
  end
end
return out
