-- redisson_rw_acquire: take or re-enter a read or write hold of a lock kept
-- as Redisson keeps an RReadWriteLock (Config.Layout = LayoutRedisson).
--
-- KEYS[1]  lock hash      NAME itself
--          field mode             -> "read" or "write"
--          field ID:THREAD        -> reentry count of the owner's read hold
--          field ID:THREAD:write  -> reentry count of the owner's write hold
--          PEXPIRE = the longest lease
-- KEYS[2]  token counter  redisson_lock_token:{NAME}
-- KEYS[3]  reader timeouts {NAME}:ID:THREAD:rwlock_timeout (NAME as is when it
--                         holds a '{'): the prefix of the owner's per-hold
--                         timeout keys, PREFIX:1 … PREFIX:n for n nested read
--                         holds, each PEXPIRE = its lease (read holds only)
-- ARGV[1]  hold field     ID:THREAD (read) or ID:THREAD:write (write)
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  the count the caller believes the owner holds in this mode (0 = fresh)
-- ARGV[4]  "r" or "w"
--
-- Redisson's rules, kept here: readers share while mode is read (or while
-- the reader's own owner holds the write lock); a writer is granted only
-- when the hash does not exist; a waiter gets the hash's PTTL and waits for
-- a message on redisson_rwlock:{NAME}. There is no writer preference (Java
-- processes would not honour it). A write request of an owner holding a read
-- hold would wait for itself (Redisson lets it): refused with {-3}.
--
-- Replies: as acquire.lua, plus {-3}; {-2} when the name is a plain RLock
-- (a hash without a mode field). Tokens come from RFencedLock's counter.
local key, f, pfx = KEYS[1], ARGV[1], KEYS[3]
local lease, expected, mode = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local owner = f
if mode == 'w' then owner = string.sub(f, 1, -7) end

local function peek()
  return tonumber(redis.call('get', KEYS[2]) or '0')
end
local function extend()
  if redis.call('pttl', key) < lease then redis.call('pexpire', key, lease) end
end

local cur = redis.call('hget', key, 'mode')
if not cur and redis.call('exists', key) == 1 then
  return {-2}
end
local v = redis.call('hget', key, f)
local count = 0
if v then count = tonumber(v) end

if count == expected + 1 or (count > 0 and count == expected) then
  if count == expected then
    count = redis.call('hincrby', key, f, 1)
    if mode == 'r' then redis.call('set', pfx .. ':' .. count, 1, 'px', lease) end
  end
  extend()
  return {1, count, peek()}
end
if count ~= expected then
  return {-1, count}
end

if mode == 'r' then
  if cur == 'write' and redis.call('hexists', key, owner .. ':write') == 0 then
    return {0, redis.call('pttl', key)}
  end
  if not cur then redis.call('hset', key, 'mode', 'read') end
  redis.call('hincrby', key, f, 1)
  redis.call('set', pfx .. ':1', 1, 'px', lease)
  extend()
  return {1, 1, redis.call('incr', KEYS[2])}
end
if cur then
  if redis.call('hexists', key, owner) == 1 then return {-3} end
  return {0, redis.call('pttl', key)}
end
redis.call('hset', key, 'mode', 'write', f, 1)
redis.call('pexpire', key, lease)
return {1, 1, redis.call('incr', KEYS[2])}
