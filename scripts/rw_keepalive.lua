-- rw_keepalive: keep the claims of many waiting writers alive in one call
-- (the read-write kind's keep-alive batch; layout in rw_acquire.lua).
--
-- KEYS[i]      lock hash of waiter i: holdfast:{NAME}
-- ARGV[2i-1]   the waiter's hold field, "CLIENTID:INSTANCE:OWNER:w" for a writer or
--              "CLIENTID:INSTANCE:OWNER:r" for a reader; a writer's claim is the field
--              "CLIENTID:INSTANCE:OWNER:c", with the lease key KEYS[i]..':rw:'..that
-- ARGV[2i]     claim lease in milliseconds (the WaiterTimeout)
--
-- Reply: an array with one entry per key: 1 when the writer's claim is still
-- there and now lives for the claim lease, 0 when it is gone (it lapsed, or
-- the writer was granted: the waiter tries again at once and learns which).
-- A waiting reader keeps nothing in Redis: always 1.
local out = {}
for i = 1, #KEYS do
  local key, f = KEYS[i], ARGV[2 * i - 1]
  local lease = tonumber(ARGV[2 * i])
  out[i] = 1
  if string.sub(f, -2) == ':w' then
    local cf = string.sub(f, 1, -3) .. ':c'
    local ck = key .. ':rw:' .. cf
    out[i] = 0
    -- pcall: a reentrant lock's key is a string (WRONGTYPE): no claim.
    if redis.pcall('hexists', key, cf) == 1 and redis.call('pexpire', ck, lease) == 1 then
      local kt = redis.call('pttl', key)
      if kt >= 0 and kt < lease then redis.call('pexpire', key, lease) end
      out[i] = 1
    elseif redis.pcall('hexists', key, cf) == 1 then
      redis.call('hdel', key, cf)
    end
  end
end
return out
