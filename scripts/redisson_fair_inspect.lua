-- redisson_fair_inspect: count the live waiters of a Redisson fair lock's
-- line, for Client.Inspect under LayoutRedisson (layout in
-- redisson_fair_common.lua).
--
-- KEYS[1]  line       redisson_lock_queue:{NAME}
-- KEYS[2]  deadlines  redisson_lock_timeout:{NAME}
--
-- Reply: -1 when NAME has no line (an RLock's, or a free name), else the
-- number of waiters in it whose deadline has not passed by Redis's clock.
local L, Z = KEYS[1], KEYS[2]
if redis.call('type', L).ok ~= 'list' then return -1 end
local now = now_ms()
local n = 0
for _, f in ipairs(redis.call('lrange', L, 0, -1)) do
  local deadline = redis.call('zscore', Z, f)
  if deadline and tonumber(deadline) > now then n = n + 1 end
end
return n
