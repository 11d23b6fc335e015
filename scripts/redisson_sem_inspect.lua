-- redisson_sem_inspect: read a semaphore kept as Redisson keeps an
-- RPermitExpirableSemaphore, in one step, for Client.Inspect under
-- LayoutRedisson (keys in redisson_sem_acquire.lua). It changes nothing: a
-- lease that ended is left for the next acquire or release to take back,
-- and not shown.
--
-- KEYS[1]  NAME
-- KEYS[2]  {NAME}:timeout
--
-- Reply: {-3} when the keys are not a semaphore's; else
-- {size, id1, left1, id2, left2, ...}: the semaphore's size (free count plus
-- lease records), then every permit whose lease has not ended, its id in
-- hex and the milliseconds left of its lease (-1: no lease).
local ft, lt = redis.call('type', KEYS[1]).ok, redis.call('type', KEYS[2]).ok
if ft ~= 'string' or (lt ~= 'none' and lt ~= 'zset') then return {-3} end
local avail = redis.call('get', KEYS[1])
if not string.match(avail, '^%-?%d+$') then return {-3} end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {tonumber(avail) + redis.call('zcard', KEYS[2])}
local live = redis.call('zrangebyscore', KEYS[2], '(' .. string.format('%d', now), '+inf', 'withscores')
for i = 1, #live, 2 do
  out[#out + 1] = (live[i]:gsub('.', function(c) return string.format('%02x', string.byte(c)) end))
  local ends = tonumber(live[i + 1])
  if ends >= 922337203685477 then
    out[#out + 1] = -1
  else
    out[#out + 1] = ends - now
  end
end
return out
