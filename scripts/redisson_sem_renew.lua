-- redisson_sem_renew: extend the leases of many permits of semaphores kept
-- as Redisson keeps an RPermitExpirableSemaphore (the watchdog's batch; keys
-- in redisson_sem_acquire.lua).
--
-- KEYS[i]      lease records of permit i: {NAME}:timeout
-- ARGV[2i-1]   permit id of permit i (32 hex digits)
-- ARGV[2i]     lease of permit i in milliseconds
--
-- Reply: one entry per key, 1 when the permit's lease has not ended and now
-- ends no sooner than the lease from now (Redis's clock), 0 when the permit
-- is gone or its lease ended (the next acquire or release of the name takes
-- it back, as Redisson does). A lease is only ever extended.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for i = 1, #KEYS do
  local hexid, lease = ARGV[2 * i - 1], tonumber(ARGV[2 * i])
  out[i] = 0
  if #hexid == 32 and not hexid:find('[^0-9a-f]') and lease then
    local id = hexid:gsub('..', function(h) return string.char(tonumber(h, 16)) end)
    -- pcall: a key of another type holds no permit.
    local score = redis.pcall('zscore', KEYS[i], id)
    if type(score) == 'string' and tonumber(score) > now then
      local ends = now + lease
      if tonumber(score) < ends then redis.call('zadd', KEYS[i], string.format('%d', ends), id) end
      out[i] = 1
    end
  end
end
return out
