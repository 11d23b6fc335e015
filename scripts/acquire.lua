-- acquire: take or re-enter the reentrant lock at KEYS[1] for one owner.
--
-- KEYS[1]  lock hash      holdfast:{NAME}        field OWNER -> reentry count
-- KEYS[2]  fence counters scripts.FenceKeys(NAME): the slot counter, then the
-- KEYS[3]                 old per-name counter (see fence.lua)
-- KEYS[4]  fair queue     holdfast:{NAME}:q      only read: a name queued as fair is not ours
-- KEYS[5]  waiter mark    holdfast:{NAME}:w      set when this call refuses (see below)
-- ARGV[1]  owner field    CLIENTID:INSTANCE:OWNER
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  the count the caller believes the owner holds before this grant (0 = fresh)
--
-- Replies:
--   {1, count, token}  granted; token is the fencing token of the owner's hold
--                      (a nested grant or a repeat answers fence_peek: at
--                      least the hold's token, below any later grant's)
--   {0, pttl}          held by another owner; pttl bounds the caller's sleep. The
--                      waiter mark is set, living pttl + lease ms: while it lives,
--                      release.lua announces the release. The mark only saves
--                      PUBLISHes nobody hears; a waiter whose mark lapsed still
--                      retries at pttl (wake-ups are hints).
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

-- The common fresh grant: no lock hash, no fair queue and no old per-name
-- counter (one EXISTS tells) means the name is free, of no kind, and the
-- owner holds nothing; the token is the slot counter's next value. This is
-- what the general path below does in that case, in four calls instead of six.
if expected == 0 and redis.call('exists', KEYS[1], KEYS[4], KEYS[3]) == 0 then
  -- HINCRBY as below (not HSET): the commands a grant needs, and so the ACL
  -- a user needs, do not depend on the path.
  redis.call('hincrby', KEYS[1], ARGV[1], 1)
  local token = redis.call('incr', KEYS[2])
  redis.call('pexpire', KEYS[1], lease)
  return {1, 1, token}
end

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
-- A fresh grant reads the hash and the fair queue with one EXISTS: neither
-- there (the common case) means free and of no kind.
if count == 0 and redis.call('exists', KEYS[1], KEYS[4]) > 0 then
  -- kind: a name held or queued as another kind refuses it.
  if redis.call('hexists', KEYS[1], 'kind') == 1 or redis.call('exists', KEYS[4]) == 1 then
    return {-2}
  end
  local pttl = redis.call('pttl', KEYS[1])
  local mark = lease
  if pttl > 0 then mark = pttl + lease end
  redis.call('set', KEYS[5], '1', 'px', mark)
  return {0, pttl}
end

count = redis.call('hincrby', KEYS[1], ARGV[1], 1)
local token
if count == 1 then
  token = fence_take(KEYS[2], KEYS[3])
else
  token = fence_peek(KEYS[2], KEYS[3])
end
-- A fresh grant made the hash just now, without a TTL.
if count == 1 or redis.call('pttl', KEYS[1]) < lease then redis.call('pexpire', KEYS[1], lease) end
return {1, count, token}
