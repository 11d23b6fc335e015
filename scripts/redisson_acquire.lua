-- redisson_acquire: take or re-enter a lock kept as Redisson keeps an RLock
-- or RFencedLock (Config.Layout = LayoutRedisson), for one owner.
--
-- KEYS[1]  lock hash      NAME itself             field ID:THREAD -> reentry count, PEXPIRE = lease
-- KEYS[2]  token counter  redisson_lock_token:{NAME}   RFencedLock's counter, no TTL
-- ARGV[1]  owner field    ID:THREAD (scripts.RedissonField)
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  the count the caller believes the owner holds before this grant (0 = fresh)
--
-- Redisson grants when the hash does not exist or has the caller's field
-- (HINCRBY, PEXPIRE), and RFencedLock INCRs the counter on every grant; a
-- refused caller gets the hash's PTTL and waits for the integer message 0 on
-- redisson_lock__channel:{NAME}, which every release that deletes the hash
-- publishes (redisson_release.lua). This script keeps to those effects, so a
-- Java holder and a Go holder of NAME exclude each other.
--
-- Replies (as acquire.lua):
--   token              a fresh grant (count 1) whose token is > 0, as every
--                      token is unless the counter was set by hand: the
--                      common reply, a bare integer (lockactor.DecodeAcquire)
--   {1, count, token}  granted; a fresh grant's token is the counter's new
--                      value, a reentry's or a repeat's the counter's current
--                      one (at least the hold's token, below any later grant's)
--   {0, pttl}          held by another owner (Java or Go)
--   {-1, count}        the owner's count is not what the caller believes
--   {-2}               the name is an RReadWriteLock (its hash has a mode field)
--
-- Unlike Redisson, a reentry only ever extends the TTL: a nested grant with a
-- shorter lease cannot cut the lease the outer grant's deadline counts on.
local key, f = KEYS[1], ARGV[1]
local lease, expected = tonumber(ARGV[2]), tonumber(ARGV[3])

local function peek()
  return tonumber(redis.call('get', KEYS[2]) or '0')
end

-- The common fresh grant: no hash means free (and no RReadWriteLock).
if expected == 0 and redis.call('exists', key) == 0 then
  local token = redis.call('incr', KEYS[2])
  redis.call('hincrby', key, f, 1)
  redis.call('pexpire', key, lease)
  if token > 0 then return token end
  return {1, 1, token}
end
if redis.call('hexists', key, 'mode') == 1 then return {-2} end
local v = redis.call('hget', key, f)
local count = 0
if v then count = tonumber(v) end

if count == expected + 1 or (count > 0 and count == expected) then
  if count == expected then count = redis.call('hincrby', key, f, 1) end
  if redis.call('pttl', key) < lease then redis.call('pexpire', key, lease) end
  return {1, count, peek()}
end
if count ~= expected then
  return {-1, count}
end
if redis.call('exists', key) == 1 then
  return {0, redis.call('pttl', key)}
end
local token = redis.call('incr', KEYS[2])
redis.call('hincrby', key, f, 1)
redis.call('pexpire', key, lease)
if token > 0 then return token end
return {1, 1, token}
