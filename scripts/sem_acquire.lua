-- sem_acquire: take or re-enter one permit of the semaphore at KEYS[2] for
-- one owner.
--
-- KEYS[1]  lease key      holdfast:{NAME}:sem:FIELD, this permit's own lease;
--                         value: the hold's fencing token
-- KEYS[2]  lock hash      holdfast:{NAME}
--          field kind     -> "semaphore" (marks the name as a semaphore)
--          field permits  -> N, the permit count every caller of the name agrees on
--          field next     -> a time (Redis clock, ms) before which no permit's lease
--                            ends: a lower bound, kept by grants and set by the scans
--          field CLIENTID:INSTANCE:OWNER -> reentry count of the owner's permit
--          PEXPIRE = the longest remaining lease among the permits
-- KEYS[3]  fence counter  scripts.FenceKey(NAME) (see fence.lua)
-- KEYS[4]  fair queue     holdfast:{NAME}:q      only read: a name queued as fair is not ours
-- ARGV[1]  owner field    CLIENTID:INSTANCE:OWNER
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  the count the caller believes the owner holds (0 = fresh)
-- ARGV[4]  permits: how many owners may hold the name at once
--
-- Every permit field F has a lease key KEYS[2]..':sem:'..F in the same hash
-- slot whose PEXPIRE is that permit's own lease, so a crashed holder's permit
-- frees at its own deadline whatever the other holders renew. A field whose
-- lease key is gone is dead; a scan (PTTL of every permit's lease key) prunes
-- the dead ones. Scans are needed only when the fields alone cannot tell:
-- with fewer fields than permits there is room, and before "next" no lease
-- can have ended, so a full semaphore refuses in a few commands. Owner
-- fields always contain ':', so "kind", "permits" and "next" never collide
-- with one.
--
-- Rules: at most permits owners hold at once; an owner re-entering keeps its
-- one permit (count + 1). The permit count is the name's while any permit is
-- held: a call with another count is refused and changes nothing; once no
-- permit is held, the next grant sets the count anew.
--
-- Replies:
--   {1, count, token}  granted; token is the fencing token of this permit
--   {0, pttl}          every permit is held by others; pttl bounds the
--                      caller's sleep: the earliest end of their leases
--   {-1, count}        the owner's count is not what the caller believes
--                      (for expected > 0 and count 0: the permit is gone)
--   {-2}               the name is in use as another kind of lock
--   {-4, n}            the name is in use as a semaphore of n permits
--
-- Like acquire.lua the call is idempotent: a repeat of an attempt that
-- already ran (count is expected + 1) answers the same grant again. A fresh
-- request that meets a permit of its own field takes a new token for it (as
-- rw_acquire.lua does, for the same reasons). Leases are only ever extended.
local lk, key, f = KEYS[1], KEYS[2], ARGV[1]
local lease, expected, permits = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local pfx = key .. ':sem:'
if #f == 0 or lk ~= pfx .. f or not permits or permits < 1 then
  return redis.error_reply('ERR sem_acquire: KEYS[1] must be the field\'s lease key and permits at least 1')
end

-- pcall: a reentrant lock's key is a string (WRONGTYPE): another kind.
local got = redis.pcall('hmget', key, 'kind', 'permits', 'next', f)
if got.err then return {-2} end
local kind, n, nextv, v = got[1], tonumber(got[2] or '0'), tonumber(got[3] or ''), got[4]
if (kind ~= 'semaphore' and redis.call('exists', key) == 1) or redis.call('exists', KEYS[4]) == 1 then
  return {-2}
end

local function now_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- fields counts the permit fields, dead ones included.
local function fields()
  local c = redis.call('hlen', key) - 2
  if nextv then c = c - 1 end
  return math.max(c, 0)
end

-- scan prunes dead permits, counts the live ones of other owners, notes when
-- the first of their leases ends (soonest, ms from now) and sets next.
local function scan()
  local others, soonest, live = 0, -1, 0
  local first = -1
  local all = redis.call('hgetall', key)
  for i = 1, #all, 2 do
    local g = all[i]
    if g ~= 'kind' and g ~= 'permits' and g ~= 'next' then
      local ttl = redis.call('pttl', pfx .. g)
      if ttl == -2 then
        redis.call('hdel', key, g)
      else
        live = live + 1
        if ttl < 0 then ttl = 0 end
        if first < 0 or ttl < first then first = ttl end
        if g ~= f then
          others = others + 1
          if soonest < 0 or ttl < soonest then soonest = ttl end
        end
      end
    end
  end
  if first >= 0 and redis.call('exists', key) == 1 then
    nextv = now_ms() + first
    redis.call('hset', key, 'next', nextv)
  end
  return others, soonest, live
end

local others, soonest, live
if n ~= permits and fields() > 0 then
  -- Another count: refused while any permit of it is live.
  others, soonest, live = scan()
  if live > 0 then return {-4, n} end
end

local count = 0
if v then count = tonumber(v) end

if count == expected + 1 or (count > 0 and count == expected) then
  if count == expected then count = redis.call('hincrby', key, f, 1) end
  if expected == 0 then redis.call('set', lk, fence_take(KEYS[3]), 'keepttl') end
  if redis.call('pttl', lk) < lease then redis.call('pexpire', lk, lease) end
  if redis.call('pttl', key) < lease then redis.call('pexpire', key, lease) end
  return {1, count, tonumber(redis.call('get', lk) or '0')}
end
if count ~= expected then
  return {-1, count}
end

if not others then
  local held = fields()
  if held >= permits then
    local now = now_ms()
    if nextv and now < nextv then
      -- Full, and no lease can have ended yet.
      return {0, nextv - now}
    end
    others, soonest, live = scan()
  else
    others = held
  end
end
if others >= permits then
  return {0, soonest}
end
local token = fence_take(KEYS[3])
redis.call('hset', key, 'kind', 'semaphore', 'permits', permits, f, 1)
redis.call('set', lk, token, 'px', lease)
if redis.call('pttl', key) < lease then redis.call('pexpire', key, lease) end
local ends = now_ms() + lease
if not nextv or ends < nextv then redis.call('hset', key, 'next', ends) end
return {1, 1, token}
