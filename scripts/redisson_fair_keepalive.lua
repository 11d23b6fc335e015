-- redisson_fair_keepalive: keep many Go waiters' places in Redisson fair
-- locks' lines (the watchdog's batch, for waiters).
--
-- KEYS[i]     deadlines of waiter i  redisson_lock_timeout:{NAME}
-- ARGV[2i-1]  owner field of waiter i (ID:THREAD)
-- ARGV[2i]    WaiterTimeout of waiter i in milliseconds
--
-- Reply: one entry per key, 1 when the waiter still has its place (its
-- deadline is now at least WaiterTimeout from now, plus one more for each
-- waiter ranked ahead of it), 0 when it has none (granted, or dropped).
local out = {}
local now = now_ms()
for i = 1, #KEYS do
  local field, wt = ARGV[2 * i - 1], tonumber(ARGV[2 * i])
  local ahead = redis.call('zrank', KEYS[i], field)
  if ahead then
    refresh(KEYS[i], field, now, wt, ahead)
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
