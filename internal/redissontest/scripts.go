package redissontest

import "github.com/redis/rueidis"

// The scripts below are this package's own Lua. Each has the same effect
// on the keyspace, the same KEYS/ARGV layout and the same reply as the
// Redisson script named in its comment (see doc.go). A Lua false is a nil
// reply.

// acquireLua is RedissonLock.tryLockInnerAsync.
// KEYS[1] lock hash. ARGV[1] lease ms, ARGV[2] holder field ID:THREAD.
// nil when granted (new or reentrant), else the hash's PTTL.
var acquireLua = rueidis.NewLuaScript(`
local lock, lease, me = KEYS[1], ARGV[1], ARGV[2]
if redis.call('exists', lock) == 1 and redis.call('hexists', lock, me) == 0 then
  return redis.call('pttl', lock)
end
redis.call('hincrby', lock, me, 1)
redis.call('pexpire', lock, lease)
return false
`)

// fencedAcquireLua is RedissonFencedLock.tryLockInnerAsync (the one behind
// lock()/tryLock() of an RFencedLock): acquireLua that also INCRs the
// token counter on every grant.
// KEYS[1] lock hash, KEYS[2] token counter. ARGV as acquireLua.
var fencedAcquireLua = rueidis.NewLuaScript(`
local lock, counter, lease, me = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
if redis.call('exists', lock) == 1 and redis.call('hexists', lock, me) == 0 then
  return redis.call('pttl', lock)
end
redis.call('incr', counter)
redis.call('hincrby', lock, me, 1)
redis.call('pexpire', lock, lease)
return false
`)

// fencedTokenLua is RedissonFencedLock.tryLockInnerAsync(leaseTime, unit,
// threadId), behind lockAndGetToken/tryLockAndGetToken.
// KEYS[1] lock hash, KEYS[2] token counter. ARGV[1] lease ms, ARGV[2] field.
// {-1, token} when granted (token = INCR of the counter, on reentry too),
// else {PTTL, -1}.
var fencedTokenLua = rueidis.NewLuaScript(`
local lock, counter, lease, me = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
if redis.call('exists', lock) == 1 and redis.call('hexists', lock, me) == 0 then
  return {redis.call('pttl', lock), -1}
end
local token = redis.call('incr', counter)
redis.call('hincrby', lock, me, 1)
redis.call('pexpire', lock, lease)
return {-1, token}
`)

// unlockLua is RedissonLock.unlockInnerAsync.
// KEYS[1] lock hash, KEYS[2] channel, KEYS[3] unlock latch.
// ARGV[1] message (0), ARGV[2] lease ms for a remaining reentrant hold,
// ARGV[3] field, ARGV[4] publish command, ARGV[5] latch PX.
// A set latch answers its value again. nil: not held by ARGV[3]. 0: still
// held (count decremented, lease reset). 1: released, deleted, published.
var unlockLua = rueidis.NewLuaScript(`
local lock, channel, latch = KEYS[1], KEYS[2], KEYS[3]
local msg, lease, me, publish, latchTTL = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local earlier = redis.call('get', latch)
if earlier then
  return tonumber(earlier)
end
if redis.call('hexists', lock, me) == 0 then
  return false
end
if redis.call('hincrby', lock, me, -1) > 0 then
  redis.call('pexpire', lock, lease)
  redis.call('set', latch, '0', 'px', latchTTL)
  return 0
end
redis.call('del', lock)
redis.call(publish, channel, msg)
redis.call('set', latch, '1', 'px', latchTTL)
return 1
`)

// forceUnlockLua is RedissonLock.forceUnlockAsync.
// KEYS[1] lock hash, KEYS[2] channel. ARGV[1] message (0), ARGV[2] publish
// command. 1 and a message when the key existed, else 0.
var forceUnlockLua = rueidis.NewLuaScript(`
if redis.call('del', KEYS[1]) == 0 then
  return 0
end
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1
`)

// readAcquireLua is RedissonReadLock.tryLockInnerAsync.
// KEYS[1] rwlock hash, KEYS[2] this reader's timeout prefix
// ({NAME}:ID:THREAD:rwlock_timeout). ARGV[1] lease ms, ARGV[2] reader field
// ID:THREAD, ARGV[3] the same thread's writer field ID:THREAD:write.
var readAcquireLua = rueidis.NewLuaScript(`
local lock, prefix = KEYS[1], KEYS[2]
local lease, me, meWriting = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local mode = redis.call('hget', lock, 'mode')
if not mode then
  redis.call('hset', lock, 'mode', 'read')
  redis.call('hset', lock, me, 1)
  redis.call('set', prefix .. ':1', 1)
  redis.call('pexpire', prefix .. ':1', lease)
  redis.call('pexpire', lock, lease)
  return false
end
local shared = mode == 'read'
if not shared and mode == 'write' then
  shared = redis.call('hexists', lock, meWriting) == 1
end
if not shared then
  return redis.call('pttl', lock)
end
local nth = redis.call('hincrby', lock, me, 1)
local timeout = prefix .. ':' .. nth
redis.call('set', timeout, 1)
redis.call('pexpire', timeout, lease)
local left = redis.call('pttl', lock)
if left < lease then
  left = lease
end
redis.call('pexpire', lock, left)
return false
`)

// readUnlockLua is RedissonReadLock.unlockInnerAsync.
// KEYS[1] rwlock hash, KEYS[2] rwlock channel, KEYS[3] this reader's
// timeout prefix, KEYS[4] key prefix ({NAME}), KEYS[5] unlock latch.
// ARGV[1] message (0), ARGV[2] reader field, ARGV[3] publish command,
// ARGV[4] latch PX.
var readUnlockLua = rueidis.NewLuaScript(`
local lock, channel, prefix, keyPrefix, latch = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local msg, me, publish, latchTTL = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local earlier = redis.call('get', latch)
if earlier then
  return tonumber(earlier)
end
local mode = redis.call('hget', lock, 'mode')
if not mode then
  redis.call(publish, channel, msg)
  redis.call('set', latch, '1', 'px', latchTTL)
  return false
end
if redis.call('hexists', lock, me) == 0 then
  return false
end
local left = redis.call('hincrby', lock, me, -1)
if left == 0 then
  redis.call('hdel', lock, me)
end
redis.call('del', prefix .. ':' .. (left + 1))
if redis.call('hlen', lock) > 1 then
  local longest = -3
  for _, field in ipairs(redis.call('hkeys', lock)) do
    local holds = tonumber(redis.call('hget', lock, field))
    if holds then
      for n = 1, holds do
        local ttl = redis.call('pttl', keyPrefix .. ':' .. field .. ':rwlock_timeout:' .. n)
        if ttl > longest then
          longest = ttl
        end
      end
    end
  end
  if longest > 0 then
    redis.call('pexpire', lock, longest)
    redis.call('set', latch, '0', 'px', latchTTL)
    return 0
  end
  if mode == 'write' then
    redis.call('set', latch, '0', 'px', latchTTL)
    return 0
  end
end
redis.call('del', lock)
redis.call(publish, channel, msg)
redis.call('set', latch, '1', 'px', latchTTL)
return 1
`)

// writeAcquireLua is RedissonWriteLock.tryLockInnerAsync.
// KEYS[1] rwlock hash. ARGV[1] lease ms, ARGV[2] writer field ID:THREAD:write.
var writeAcquireLua = rueidis.NewLuaScript(`
local lock, lease, me = KEYS[1], tonumber(ARGV[1]), ARGV[2]
local mode = redis.call('hget', lock, 'mode')
if not mode then
  redis.call('hset', lock, 'mode', 'write')
  redis.call('hset', lock, me, 1)
  redis.call('pexpire', lock, lease)
  return false
end
if mode == 'write' and redis.call('hexists', lock, me) == 1 then
  redis.call('hincrby', lock, me, 1)
  redis.call('pexpire', lock, redis.call('pttl', lock) + lease)
  return false
end
return redis.call('pttl', lock)
`)

// writeUnlockLua is RedissonWriteLock.unlockInnerAsync.
// KEYS[1] rwlock hash, KEYS[2] rwlock channel, KEYS[3] unlock latch.
// ARGV[1] message (1), ARGV[2] lease ms for a remaining reentrant hold,
// ARGV[3] writer field, ARGV[4] publish command, ARGV[5] latch PX.
var writeUnlockLua = rueidis.NewLuaScript(`
local lock, channel, latch = KEYS[1], KEYS[2], KEYS[3]
local msg, lease, me, publish, latchTTL = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local earlier = redis.call('get', latch)
if earlier then
  return tonumber(earlier)
end
local mode = redis.call('hget', lock, 'mode')
if not mode then
  redis.call(publish, channel, msg)
  redis.call('set', latch, '1', 'px', latchTTL)
  return false
end
if mode ~= 'write' or redis.call('hexists', lock, me) == 0 then
  return false
end
if redis.call('hincrby', lock, me, -1) > 0 then
  redis.call('pexpire', lock, lease)
  redis.call('set', latch, '0', 'px', latchTTL)
  return 0
end
redis.call('hdel', lock, me)
if redis.call('hlen', lock) == 1 then
  redis.call('del', lock)
  redis.call(publish, channel, msg)
else
  redis.call('hset', lock, 'mode', 'read')
end
redis.call('set', latch, '1', 'px', latchTTL)
return 1
`)

// forceModeUnlockLua is RedissonReadLock.forceUnlockAsync (ARGV[3] "read",
// ARGV[1] 0) and RedissonWriteLock.forceUnlockAsync (ARGV[3] "write",
// ARGV[1] 1): delete the hash and publish only when its mode is ARGV[3].
// KEYS[1] rwlock hash, KEYS[2] rwlock channel. ARGV[2] publish command.
var forceModeUnlockLua = rueidis.NewLuaScript(`
if redis.call('hget', KEYS[1], 'mode') ~= ARGV[3] then
  return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1
`)

// readLockedLua is RedissonReadLock.isLocked: 1 when the mode is read, or
// write with a reader besides the writer (more than two fields).
var readLockedLua = rueidis.NewLuaScript(`
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == 'read' or (mode == 'write' and redis.call('hlen', KEYS[1]) > 2) then
  return 1
end
return 0
`)

// renewLua is renewal.LockTask's script.
// KEYS[i] lock hash i. ARGV[1] lease ms, ARGV[i+1] the field to check in
// KEYS[i]. For each i: when the field exists, PEXPIRE KEYS[i] ARGV[1] and
// answer 1, else 0.
var renewLua = rueidis.NewLuaScript(`
local lease = ARGV[1]
local alive = {}
for i, lock in ipairs(KEYS) do
  alive[i] = 0
  if redis.call('hexists', lock, ARGV[i + 1]) == 1 then
    redis.call('pexpire', lock, lease)
    alive[i] = 1
  end
end
return alive
`)

// renewReadLua is renewal.ReadLockTask's script (Redisson 4.4.0 and later).
// KEYS come in pairs: KEYS[2j-1] rwlock hash, KEYS[2j] its key prefix
// ({NAME}). ARGV[1] lease ms, then per pair a count c and c reader fields.
// For each pair: every listed field present in the hash has its timeout
// keys 1..holds PEXPIREd; if any was present the hash is PEXPIREd and the
// answer is 1, else 0.
var renewReadLua = rueidis.NewLuaScript(`
local lease = ARGV[1]
local alive = {}
local a = 2
for j = 1, #KEYS / 2 do
  local lock, keyPrefix = KEYS[2 * j - 1], KEYS[2 * j]
  local count = tonumber(ARGV[a])
  a = a + 1
  local any = false
  for k = 1, count do
    local field = ARGV[a]
    a = a + 1
    local holds = tonumber(redis.call('hget', lock, field))
    if holds then
      any = true
      for n = 1, holds do
        redis.call('pexpire', keyPrefix .. ':' .. field .. ':rwlock_timeout:' .. n, lease)
      end
    end
  end
  alive[j] = 0
  if any then
    redis.call('pexpire', lock, lease)
    alive[j] = 1
  end
end
return alive
`)
