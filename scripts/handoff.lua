-- handoff: the final release of one owner and a fresh acquire for the next
-- local waiter, in one call. A lock handed between two requests of the same
-- process costs one round trip and wakes nobody else.
--
-- KEYS[1]  lock hash      holdfast:{NAME}
-- KEYS[2]  fence counters scripts.FenceKeys(NAME): the slot counter, then the
-- KEYS[3]                 old per-name counter (see fence.lua)
-- KEYS[4]  fair queue     holdfast:{NAME}:q, not used: the keys are acquire.lua's
-- KEYS[5]  waiter mark    holdfast:{NAME}:w, set when the acquire half is
--                         refused, as acquire.lua sets it
-- ARGV[1]  releasing owner field; the caller believes it holds count 1
-- ARGV[2]  acquiring owner field; the caller believes it holds nothing
-- ARGV[3]  lease of the acquiring owner in milliseconds
--
-- The lock is never left free, so nothing is published: it ends granted to
-- the acquiring owner or held by someone else.
--
-- Reply: {left, code, x, token}. left is the release's outcome, as the
-- release script answers it (0 released; -1 the releasing owner holds
-- nothing here; -2 its count is not 1). {code, x, token} is the acquire's
-- outcome for the acquiring owner, as the acquire script answers it with
-- expected 0: {1, 1, token} granted, {0, pttl} held by another owner,
-- {-1, count} the acquiring owner already holds count in Redis.
--
-- A repeat of this call is not idempotent; callers that may have run it
-- repeat the release alone, then acquire with expected 0 (which answers a
-- grant that already ran).
local left = 0
local v = redis.call('hget', KEYS[1], ARGV[1])
if not v then
  left = -1
elseif tonumber(v) ~= 1 then
  left = -2
else
  redis.call('hdel', KEYS[1], ARGV[1])
end

-- The hash is gone when the release emptied it (the common case): then the
-- acquiring owner holds nothing there either.
if redis.call('exists', KEYS[1]) == 1 then
  local w = redis.call('hget', KEYS[1], ARGV[2])
  if w then
    return {left, -1, tonumber(w)}
  end
  local pttl = redis.call('pttl', KEYS[1])
  local mark = tonumber(ARGV[3])
  if pttl > 0 then mark = pttl + mark end
  redis.call('set', KEYS[5], '1', 'px', mark)
  return {left, 0, pttl}
end
redis.call('hset', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], tonumber(ARGV[3]))
return {left, 1, 1, fence_take(KEYS[2], KEYS[3])}
