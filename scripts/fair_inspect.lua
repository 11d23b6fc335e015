-- fair_inspect: read the fair lock of NAME in one step, for Client.Inspect.
-- Runs after fair_common.lua.
--
-- KEYS[1]  lock hash  holdfast:{NAME}
-- KEYS[2]  queue      holdfast:{NAME}:q
--
-- Reply: {pttl, waiters, field1, count1, ...}: the hash's PTTL (-2 when no
-- one holds or is granted the lock, -1 without expiry), the number of live
-- waiters (deadline not passed), and the holders (count 0: granted, not yet
-- confirmed). {-3} when the name is not in use as a fair lock.
local H, Q = KEYS[1], KEYS[2]
-- pcall: a reentrant lock's key is a string (WRONGTYPE): not ours.
local kind = redis.pcall('hget', H, 'kind')
if type(kind) == 'table' or (kind ~= 'fair' and redis.call('exists', Q) == 0) then
  return {-3}
end
local now = now_ms()
local waiters = 0
local queue = redis.call('hgetall', Q)
for i = 1, #queue, 2 do
  if queue[i] ~= 'seq' then
    local _, deadline = place(queue[i + 1])
    if deadline > now then waiters = waiters + 1 end
  end
end
local out = {redis.call('pttl', H), waiters}
local fields = redis.call('hgetall', H)
for i = 1, #fields, 2 do
  if fields[i] ~= 'kind' then
    out[#out + 1] = fields[i]
    out[#out + 1] = fields[i + 1]
  end
end
return out
