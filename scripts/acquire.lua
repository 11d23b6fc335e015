-- acquire: take or re-enter the reentrant lock at KEYS[1] for one owner.
--
-- KEYS[1]  lock hash      holdfast:{NAME}        field OWNER -> reentry count
-- KEYS[2]  fence counters scripts.FenceKeys(NAME): the slot counter, then the
-- KEYS[3]                 old per-name counter (see fence.lua)
-- KEYS[4]  fair queue     holdfast:{NAME}:q      only read: a name queued as fair is not ours
-- ARGV[1]  owner field    CLIENTID:INSTANCE:OWNER
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  the count the caller believes the owner holds before this grant (0 = fresh)
--
-- Replies:
--   {1, count, token}  granted; token is the fencing token of the owner's hold
--                      (a nested grant or a repeat answers fence_peek: at
--                      least the hold's token, below any later grant's)
--   {0, pttl}          held by another owner; pttl bounds the caller's sleep
--   {-1, count}        the owner's count in Redis is not what the caller believes
--                      (for expected > 0 and count 0: the hold is gone)
--   {-2}               the name is in use as another kind of lock (its hash has a
--                      "kind" field, or fair waiters are queued): nothing changed
--
-- The call is idempotent: a retry of an attempt that already ran (count is
-- expected + 1) answers the same grant again, so a caller that saw a timeout can
-- repeat the call to learn the outcome. The TTL is only ever extended, never
-- shortened, so a nested grant with a shorter lease cannot cut the lease the
-- outer grant's validity deadline was computed from.
local lease = tonumber(ARGV[2])
local expected = tonumber(ARGV[3])
local v = redis.call('hget', KEYS[1], ARGV[1])
local count = 0
if v then count = tonumber(v) end

if count == expected + 1 then
  if redis.call('pttl', KEYS[1]) < lease then redis.call('pexpire', KEYS[1], lease) end
  return {1, count, fence_peek(KEYS[2], KEYS[3])}
end
if count ~= expected then
  return {-1, count}
end
-- kind: only a fresh grant checks; a name held or queued as another kind refuses it.
if count == 0 and (redis.call('hexists', KEYS[1], 'kind') == 1 or redis.call('exists', KEYS[4]) == 1) then
  return {-2}
end
if count == 0 and redis.call('exists', KEYS[1]) == 1 then
  return {0, redis.call('pttl', KEYS[1])}
end

count = redis.call('hincrby', KEYS[1], ARGV[1], 1)
local token
if count == 1 then
  token = fence_take(KEYS[2], KEYS[3])
else
  token = fence_peek(KEYS[2], KEYS[3])
end
if redis.call('pttl', KEYS[1]) < lease then redis.call('pexpire', KEYS[1], lease) end
return {1, count, token}
