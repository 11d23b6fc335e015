-- acquire: take or re-enter the reentrant lock at KEYS[1] for one owner.
--
-- KEYS[1]  lock key       holdfast:{NAME}        string, see below
-- KEYS[2]  fence counter  scripts.FenceKey(NAME), the slot counter (see fence.lua)
-- KEYS[3]  fair queue     holdfast:{NAME}:q      only read: a name queued as fair is not ours
-- ARGV[1]  owner field    CLIENTID:INSTANCE:OWNER
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  the count the caller believes the owner holds before this grant (0 = fresh)
--
-- The lock key exists exactly while the name is held, PEXPIRE = the lease.
-- It is a string:
--
--   [w] COUNT ":" TOKEN ":" FIELD        e.g. 2:1041:web-3/4121:0a1b2c3d4e5f:~7
--
-- the holder's reentry count, the fencing token of its hold (taken by the
-- fresh grant, answered again by every nested grant and repeat), and its
-- owner field, last (the OWNER part may contain anything). A leading "w" is
-- the waiter mark: a refused acquire sets it, and the release that frees the
-- name then announces it on the channel; a lock nobody waited for is released
-- without a PUBLISH. The other kinds keep a hash at the same key (with a
-- field "kind"): a string there is this kind, a hash another. Every script of
-- the kind reads the key with redis.pcall, so another kind's hash is a
-- WRONGTYPE reply to decide on, not an error (any other error, such as an ACL
-- refusal, is returned as the script's error). A string holdfast did not
-- write is nobody's lock: the scripts answer it with a WRONGTYPE error and
-- change nothing, as Redis answers a key of the wrong type (renew.lua: the
-- owner holds nothing there).
--
-- Replies:
--   token              a fresh grant (count 1) whose token is > 0, which every
--                      token is unless a fence was set by hand: the common
--                      reply, a bare integer, costs the server no table and
--                      the client no array (lockactor.DecodeAcquire)
--   {1, count, token}  granted; token is the fencing token of the owner's hold
--   {0, pttl}          held by another owner; pttl bounds the caller's sleep.
--                      The hold is marked (the leading "w"): its release, or
--                      a handoff's, announces itself. The mark only saves
--                      PUBLISHes nobody hears; a waiter still retries at pttl
--                      (wake-ups are hints).
--   {-1, count}        the owner's count in Redis is not what the caller believes
--                      (for expected > 0 and count 0: the hold is gone)
--   {-2}               the name is in use as another kind of lock (its key is
--                      a hash, or fair waiters are queued): nothing changed
--
-- The call is idempotent: a retry of an attempt that already ran (count is
-- expected + 1) answers the same grant again, so a caller that saw a timeout can
-- repeat the call to learn the outcome. The TTL is only ever extended, never
-- shortened (PEXPIRE GT), so a nested grant with a shorter lease cannot cut the
-- lease the outer grant's validity deadline was computed from.
local K, field, lease, expected = KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3])

-- The common fresh grant: no lock key and no fair queue (one EXISTS tells)
-- means the name is free and of no kind.
if expected == 0 and redis.call('exists', K, KEYS[3]) == 0 then
  local token = fence_take(KEYS[2])
  redis.call('set', K, string.format('1:%d:%s', token, field), 'px', lease)
  if token > 0 then return token end
  return {1, 1, token}
end

local v = redis.pcall('get', K)
if type(v) == 'table' and string.sub(v.err, 1, 9) ~= 'WRONGTYPE' then return v end
if type(v) ~= 'string' then
  -- A hash (WRONGTYPE: another kind's), or no key while EXISTS counted one
  -- (fair waiters are queued): a fresh grant is refused. A hold the caller
  -- believes it has is gone either way.
  if expected == 0 then return {-2} end
  return {-1, 0}
end
local mark, count, token, owner = string.match(v, '^(w?)(%d+):(%d+):(.*)$')
if not owner then return redis.error_reply('WRONGTYPE ' .. K .. ' holds a string no holdfast script wrote') end
if owner ~= field then
  if expected > 0 then return {-1, 0} end
  if mark == '' then redis.call('set', K, 'w' .. v, 'keepttl') end
  return {0, redis.call('pttl', K)}
end
count = tonumber(count)
if count == expected + 1 then
  redis.call('pexpire', K, lease, 'gt')
  return {1, count, tonumber(token)}
end
if count ~= expected then
  return {-1, count}
end
count = count + 1
redis.call('set', K, string.format('%s%d:%s:%s', mark, count, token, field), 'keepttl')
redis.call('pexpire', K, lease, 'gt')
return {1, count, tonumber(token)}
