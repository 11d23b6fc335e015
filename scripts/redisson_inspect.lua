-- redisson_inspect: read a lock kept as Redisson keeps an RLock or an
-- RReadWriteLock, in one step, for Client.Inspect under LayoutRedisson.
--
-- KEYS[1]  NAME
--
-- Reply: {-2} when NAME is not a hash; else {pttl, mode, field1, count1, ...}
-- with mode "" for an RLock, "read" or "write" for an RReadWriteLock, then
-- every holder field (ID:THREAD, or ID:THREAD:write) and its count.
if redis.call('type', KEYS[1]).ok ~= 'hash' then return {-2} end
local out = {redis.call('pttl', KEYS[1]), redis.call('hget', KEYS[1], 'mode') or ''}
local all = redis.call('hgetall', KEYS[1])
for i = 1, #all, 2 do
  if all[i] ~= 'mode' then
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
return out
