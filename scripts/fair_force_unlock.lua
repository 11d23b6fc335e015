-- fair_force_unlock: free the fair lock of NAME whoever holds it
-- (Client.ForceUnlock) and grant it to the longest-waiting live waiter, as a
-- release would. Runs after fair_common.lua.
--
-- KEYS[1]  lock hash      holdfast:{NAME}
-- KEYS[2]  fence counter  scripts.FenceKey(NAME) (see fence.lua)
-- KEYS[3]  queue          holdfast:{NAME}:q
-- ARGV[1]  WaiterTimeout in milliseconds: how long the next waiter has to
--          confirm its grant
-- ARGV[2]  channel prefix  holdfast:{NAME}:ch:
--
-- Reply: 1 when the name was in use as a fair lock (held, granted or
-- queued), 0 otherwise (nothing changed). The fence goes up, as in
-- force_unlock.lua, so the old holder's token is stale at once.
local H, F, Q = KEYS[1], KEYS[2], KEYS[3]
-- pcall: a reentrant lock's key is a string (WRONGTYPE): not ours.
local kind = redis.pcall('hget', H, 'kind')
if type(kind) == 'table' or (kind ~= 'fair' and redis.call('exists', Q) == 0) then
  return 0
end
redis.call('del', H)
fence_take(F)
if redis.call('exists', Q) == 1 then
  grant_next(H, Q, now_ms(), tonumber(ARGV[1]), ARGV[2])
end
return 1
