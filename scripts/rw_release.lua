-- rw_release: give back one reentry of an owner's read or write hold, or all
-- of it, on the read-write lock at KEYS[2] (layout in rw_acquire.lua).
--
-- KEYS[1]  lease key  holdfast:{NAME}:rw:HOLDFIELD
-- KEYS[2]  lock hash  holdfast:{NAME}
-- ARGV[1]  hold field  CLIENTID:INSTANCE:OWNER:r or CLIENTID:INSTANCE:OWNER:w
-- ARGV[2]  the count the caller believes the owner holds in this mode before
--          this release; 0 removes the owner's hold in this mode whatever its
--          count (abandon). A write-mode release that finds no write hold, or
--          ends it, also withdraws the owner's claim (a waiting writer that
--          gave up).
-- ARGV[3]  the lock's pub/sub channel
--
-- Replies (as release.lua):
--   n >= 0  the owner's count in this mode after the release
--   -1      the owner holds nothing in this mode here; nothing changed
--           but the withdrawal of the owner's claim
--   -2      the owner's count is not what the caller believes; nothing changed
--
-- The channel is told "released" once, when this call ends a hold or claim
-- and the name may now grant what it refused: after a writer leaves (or gives
-- up its claim) with no other writer holding, every waiting reader may go;
-- after the last reader leaves, a waiting writer may go.
local lk, key, hf = KEYS[1], KEYS[2], ARGV[1]
local expected = tonumber(ARGV[2])
local pfx = key .. ':rw:'
local owner, mode = string.sub(hf, 1, -3), string.sub(hf, -2)
if (mode ~= ':r' and mode ~= ':w') or #owner == 0 or lk ~= pfx .. hf then
  return redis.error_reply('ERR rw_release: the hold field must end in :r or :w, and KEYS[1] be its lease key')
end
-- pcall: a reentrant lock's key is a string (WRONGTYPE): nothing of ours.
if redis.pcall('hget', key, 'kind') ~= 'rw' then
  return -1
end

-- drop removes a field and its lease key.
local function drop(f)
  redis.call('hdel', key, f)
  redis.call('del', pfx .. f)
end

local left, ended = -1, false
local v = redis.call('hget', key, hf)
if v and redis.call('exists', lk) == 0 then
  redis.call('hdel', key, hf)
  v = nil
end
if v then
  local count = tonumber(v)
  if expected ~= 0 and count ~= expected then
    if count == expected - 1 then return count end
    return -2
  end
  if expected ~= 0 and count > 1 then
    return redis.call('hincrby', key, hf, -1)
  end
  drop(hf)
  left, ended = 0, true
end
if mode == ':w' and (ended or not v) and redis.call('hexists', key, owner .. ':c') == 1 then
  drop(owner .. ':c')
  ended = true
end
if not ended then
  return left
end

-- Prune dead fields, then fit the hash's TTL to the longest live lease.
local writer, readers, live, best = false, 0, 0, 0
local all = redis.call('hgetall', key)
for i = 1, #all, 2 do
  local f = all[i]
  if f ~= 'kind' then
    local ttl = redis.call('pttl', pfx .. f)
    if ttl == -2 then
      redis.call('hdel', key, f)
    else
      live = live + 1
      best = math.max(best, ttl)
      local m = string.sub(f, -2)
      if m == ':w' then writer = true end
      if m == ':r' then readers = readers + 1 end
    end
  end
end
if best > 0 then
  redis.call('pexpire', key, best)
elseif live == 0 then
  redis.call('del', key)
end
if not writer and (mode == ':w' or readers == 0) then
  redis.call('publish', ARGV[3], 'released')
end
return left
