-- handoff: the final release of one owner and a fresh acquire for the next
-- local waiter, in one call. A lock handed between two requests of the same
-- process costs one round trip and wakes nobody else.
--
-- KEYS[1]  lock key       holdfast:{NAME} (layout in acquire.lua)
-- KEYS[2]  fence counter  scripts.FenceKey(NAME)
-- KEYS[3]  fair queue     holdfast:{NAME}:q, only read: the keys are acquire.lua's
-- ARGV[1]  releasing owner field; the caller believes it holds count 1
-- ARGV[2]  acquiring owner field; the caller believes it holds nothing
-- ARGV[3]  lease of the acquiring owner in milliseconds
--
-- The lock is never left free, so nothing is published: it ends granted to
-- the acquiring owner or held by someone else. The waiter mark passes to the
-- new hold: whoever waited for the old one still waits, and the new hold's
-- release announces it.
--
-- Reply: {left, code, x, token}. left is the release's outcome, as the
-- release script answers it (0 released; -1 the releasing owner holds
-- nothing here; -2 its count is not 1). {code, x, token} is the acquire's
-- outcome for the acquiring owner, as the acquire script answers it with
-- expected 0: {1, 1, token} granted, {0, pttl} held by another owner,
-- {-1, count} the acquiring owner already holds count in Redis, {-2, 0}
-- the name is in use as another kind.
--
-- A repeat of this call is not idempotent; callers that may have run it
-- repeat the release alone, then acquire with expected 0 (which answers a
-- grant that already ran).
local K = KEYS[1]
local v = redis.pcall('get', K)
if type(v) == 'table' and string.sub(v.err, 1, 9) ~= 'WRONGTYPE' then return v end
local left, mark = -1, ''
if type(v) == 'table' then
  return {-1, -2, 0}
elseif v then
  local m, count, _, owner = string.match(v, '^(w?)(%d+):(%d+):(.*)$')
  if not owner then return redis.error_reply('WRONGTYPE ' .. K .. ' holds a string no holdfast script wrote') end
  if owner == ARGV[1] then
    if count == '1' then left, mark = 0, m else left = -2 end
  end
  if left ~= 0 then
    if owner == ARGV[2] then return {left, -1, tonumber(count)} end
    if m == '' then redis.call('set', K, 'w' .. v, 'keepttl') end
    return {left, 0, redis.call('pttl', K)}
  end
elseif redis.call('exists', KEYS[3]) == 1 then
  return {-1, -2, 0}
end
local token = fence_take(KEYS[2])
redis.call('set', K, string.format('%s1:%d:%s', mark, token, ARGV[2]), 'px', ARGV[3])
return {left, 1, 1, token}
