-- redisson_sem_release: give back one reentry of an owner's permit, or the
-- permit, of a semaphore kept as Redisson keeps an
-- RPermitExpirableSemaphore (keys in redisson_sem_acquire.lua).
--
-- KEYS[1]  permits key    NAME
-- KEYS[2]  lease records  {NAME}:timeout
-- KEYS[3]  channel        redisson_sc:{NAME}
-- ARGV[1]  permit id      32 hex digits
-- ARGV[2]  the count the caller believes the owner holds before this
--          release; 0 gives the permit up whatever its count (abandon)
--
-- Replies (as release.lua):
--   n >= 0  the owner's count after the release (expected - 1, or 0)
--   -1      the owner holds no permit here (gone, or its lease ended);
--           nothing of the owner's changed
--
-- A release that gives the permit back removes its lease record, adds one
-- free permit and publishes the new free count on the channel, as
-- Redisson's release does: each subscribed Java client wakes that many of
-- its waiters, and every holdfast client's waiters try again. Redis keeps
-- no reentry count (see redisson_sem_acquire.lua), so a release of an inner
-- reentry only checks that the permit is still held.
local free, leases, channel = KEYS[1], KEYS[2], KEYS[3]
local hexid = ARGV[1]
local expected = tonumber(ARGV[2])
if #hexid ~= 32 or hexid:find('[^0-9a-f]') or not expected or expected < 0 then
  return redis.error_reply('ERR redisson_sem_release: want a 32-hex-digit id and a count')
end
local ft, lt = redis.call('type', free).ok, redis.call('type', leases).ok
if lt ~= 'zset' or (ft ~= 'none' and ft ~= 'string') then
  return -1
end
local id = hexid:gsub('..', function(h) return string.char(tonumber(h, 16)) end)
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local ended = redis.call('zrangebyscore', leases, 0, now)
if #ended > 0 then
  redis.call('zrem', leases, unpack(ended))
  local n = redis.call('incrby', free, #ended)
  if n > 0 then redis.call('publish', channel, string.format('%d', n)) end
end
if not redis.call('zscore', leases, id) then
  return -1
end
if expected > 1 then
  return expected - 1
end
redis.call('zrem', leases, id)
local n = redis.call('incrby', free, 1)
if n > 0 then redis.call('publish', channel, string.format('%d', n)) end
return 0
