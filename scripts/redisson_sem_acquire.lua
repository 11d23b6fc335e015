-- redisson_sem_acquire: take or re-enter one permit of a semaphore kept as
-- Redisson keeps an RPermitExpirableSemaphore (Config.Layout =
-- LayoutRedisson), for one owner.
--
-- KEYS[1]  permits key   NAME itself: a string, the count of free permits
-- KEYS[2]  lease records {NAME}:timeout: a sorted set, permit id -> the end
--                        of its lease (Unix ms; 922337203685477 = no lease)
-- KEYS[3]  channel       redisson_sc:{NAME}
-- ARGV[1]  permit id     32 hex digits (lockactor's hold field); the member
--                        is its 16 bytes, as Redisson stores its ids
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  the count the caller believes the owner holds (0 = fresh)
-- ARGV[4]  permits: the semaphore's size as the caller knows it
--
-- Redisson grants a permit when NAME holds at least 1 (DECRBY, ZADD of the
-- id with its lease's end), and any client that finds a lease ended takes
-- the permit back (ZREM, INCRBY) and publishes the new free count on the
-- channel; a release does the same for its own id. The size is never
-- stored: it is the free count plus the lease records. This script keeps to
-- those effects, with Redis's clock (TIME) where Redisson uses its caller's.
--
-- Rules beyond Redisson's: the caller's size must be the semaphore's (a
-- mismatch is refused and changes nothing); a name with neither key is set
-- up with the caller's size, as Redisson's trySetPermits does (and
-- announced likewise); a lease is only ever extended. Redisson keeps no
-- reentry count: the owner's count is its caller's, and Redis only tells
-- whether the permit is still held.
--
-- Replies (as sem_acquire.lua; no fencing token: it is 0):
--   {1, count, 0}  granted (count = expected + 1; a fresh call that meets
--                  its own live permit, a repeat, answers count 1)
--   {0, pttl}      no permit free; pttl: until the earliest lease ends, -1
--                  when it has none
--   {-1, 0}        a reentry whose permit is gone
--   {-2}           the keys are another kind's
--   {-4, n}        the semaphore has n permits
local free, leases, channel = KEYS[1], KEYS[2], KEYS[3]
local hexid = ARGV[1]
local lease, expected, permits = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if #hexid ~= 32 or hexid:find('[^0-9a-f]') or not lease or lease < 1 or not expected or expected < 0
    or not permits or permits < 1 then
  return redis.error_reply('ERR redisson_sem_acquire: want a 32-hex-digit id, a lease, a count and permits at least 1')
end

local ft, lt = redis.call('type', free).ok, redis.call('type', leases).ok
if (ft ~= 'none' and ft ~= 'string') or (lt ~= 'none' and lt ~= 'zset') then
  return {-2}
end
local avail = redis.call('get', free)
if avail and not string.match(avail, '^%-?%d+$') then
  return {-2}
end

-- The size first, so that a refusal changes nothing: taking back ended
-- leases below leaves it as it is.
local held = redis.call('zcard', leases)
if not avail and held == 0 then
  -- A new semaphore: trySetPermits(permits).
  redis.call('set', free, permits)
  redis.call('publish', channel, string.format('%d', permits))
  avail = tostring(permits)
end
local size = tonumber(avail or '0') + held
if size ~= permits then
  return {-4, size}
end

local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id = hexid:gsub('..', function(h) return string.char(tonumber(h, 16)) end)

-- Take back the permits whose leases ended, as every Redisson call does.
local ended = redis.call('zrangebyscore', leases, 0, now)
if #ended > 0 then
  redis.call('zrem', leases, unpack(ended))
  local n = redis.call('incrby', free, #ended)
  avail = tostring(n)
  if n > 0 then redis.call('publish', channel, string.format('%d', n)) end
end

local ends = now + lease
local score = redis.call('zscore', leases, id)
if score then
  if tonumber(score) < ends then redis.call('zadd', leases, string.format('%d', ends), id) end
  if expected == 0 then return {1, 1, 0} end
  return {1, expected + 1, 0}
end
if expected > 0 then
  return {-1, 0}
end
if tonumber(avail or '0') < 1 then
  local first = redis.call('zrange', leases, 0, 0, 'withscores')
  if first[2] and tonumber(first[2]) < 922337203685477 then
    return {0, math.max(tonumber(first[2]) - now, 0)}
  end
  return {0, -1}
end
redis.call('decrby', free, 1)
redis.call('zadd', leases, string.format('%d', ends), id)
local ttl = redis.call('pttl', free)
if ttl > 0 then redis.call('pexpire', leases, ttl) end
return {1, 1, 0}
