-- fair_keepalive: keep many waiters' places in fair queues (the watchdog's
-- batch, for waiters instead of holds).
--
-- KEYS[i]      queue of waiter i  holdfast:{NAME}:q
-- ARGV[2i-1]   owner field of waiter i
-- ARGV[2i]     WaiterTimeout of waiter i in milliseconds
--
-- Reply: one entry per key, 1 when the waiter still has its place (its
-- deadline is now WaiterTimeout from now), 0 when it has none (it was
-- granted the lock, or its place lapsed): the waiter then tries at once.
local out = {}
local now = now_ms()
for i = 1, #KEYS do
  local field, wt = ARGV[2 * i - 1], tonumber(ARGV[2 * i])
  local v = redis.call('hget', KEYS[i], field)
  if v then
    local seq = place(v)
    redis.call('hset', KEYS[i], field, seq .. ':' .. (now + wt))
    extend(KEYS[i], wt)
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
