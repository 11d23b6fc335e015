-- rw_acquire: take or re-enter a read or write hold of the read-write lock
-- at KEYS[2] for one owner.
--
-- KEYS[1]  lease key      holdfast:{NAME}:rw:HOLDFIELD, this hold's own lease
-- KEYS[2]  lock hash      holdfast:{NAME}
--          field kind            -> "rw" (marks the name as a read-write lock)
--          field CLIENTID:INSTANCE:OWNER:r -> reentry count of the owner's read hold
--          field CLIENTID:INSTANCE:OWNER:w -> reentry count of the owner's write hold
--          field CLIENTID:INSTANCE:OWNER:c -> a waiting writer's claim (value 1)
--          PEXPIRE = the longest remaining lease among the fields' lease keys
-- KEYS[3]  fence counter  scripts.FenceKey(NAME) (see fence.lua)
-- KEYS[4]  fair queue     holdfast:{NAME}:q      only read: a name queued as fair is not ours
-- ARGV[1]  hold field     CLIENTID:INSTANCE:OWNER:r (read) or CLIENTID:INSTANCE:OWNER:w (write)
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  the count the caller believes the owner holds in this mode (0 = fresh)
-- ARGV[4]  claim lease in milliseconds (the client's WaiterTimeout); 0 makes a
--          writer that must wait leave no claim (a try-once request)
--
-- Every hold and claim field F has a lease key KEYS[2]..':rw:'..F in the same
-- hash slot (value: the hold's token, or 1 for a claim) whose PEXPIRE is that
-- hold's own lease, so a crashed reader's hold ends on its own deadline
-- whatever the other readers renew. A field whose lease key is gone is
-- pruned by every script that reads the hash. Owner fields always contain
-- ':', so "kind" never collides with one.
--
-- Rules: any number of read holds; a write hold excludes every hold of other
-- owners. A writer that must wait leaves a claim, a lease of its own that
-- the waiting process keeps alive (rw_keepalive.lua); while another owner's
-- claim is live, fresh readers of other clients wait behind it (writer
-- preference; within a client the local queue orders them), but an owner
-- that holds the name already (a reader re-entering, a writer taking a
-- read) is granted. A read holder asking for a fresh write hold would wait
-- for itself: refused.
--
-- Replies:
--   {1, count, token}  granted; token is the fencing token of this hold
--   {0, pttl}          must wait; pttl bounds the caller's sleep: the longest
--                      lease of the holds in the way, or for a reader behind
--                      a waiting writer the longest claim lease
--   {-1, count}        the owner's count in this mode is not what the caller
--                      believes (for expected > 0 and count 0: the hold is gone)
--   {-2}               the name is in use as another kind of lock
--   {-3}               the owner holds a read hold and asks for a fresh write
--                      hold: it would wait for itself
--
-- Like acquire.lua the call is idempotent: a repeat of an attempt that already
-- ran (count is expected + 1) answers the same grant again. A fresh request
-- (expected 0) that meets a hold of its own field takes a new token for it:
-- the hold is its own attempt whose reply was lost, or one its client gave up
-- on (an undo a failover's roll-back lost); either way no holder uses its
-- token, and the new one is above every token granted since (a reader of the
-- same owner may have been granted beside it). Leases are only ever extended,
-- never shortened.
local lk, key, hf = KEYS[1], KEYS[2], ARGV[1]
local lease, expected, claimms = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local pfx = key .. ':rw:'
local owner, mode = string.sub(hf, 1, -3), string.sub(hf, -2)
if (mode ~= ':r' and mode ~= ':w') or #owner == 0 or lk ~= pfx .. hf then
  return redis.error_reply('ERR rw_acquire: the hold field must end in :r or :w, and KEYS[1] be its lease key')
end

-- FENCE: the one place this script takes a fencing token.
local function take_token()
  return fence_take(KEYS[3])
end

-- pcall: a reentrant lock's key is a string, whose WRONGTYPE reply is no
-- 'rw' either.
local kind = redis.pcall('hget', key, 'kind')
if (kind ~= 'rw' and redis.call('exists', key) == 1) or redis.call('exists', KEYS[4]) == 1 then
  return {-2}
end

-- Prune dead fields; note who else holds and how long the live leases run.
-- Claims of this owner's own client do not hold its readers back: within a
-- client, the local queue already orders readers and writers. A client is
-- CLIENTID:INSTANCE, the first two parts of a field (ClientIDs may be
-- shared; the instance part is not).
local client = string.match(owner, '^[^:]*:[^:]*')
local writer, readers, claims = false, 0, 0
local blockttl, claimttl = 0, 0
local all = redis.call('hgetall', key)
for i = 1, #all, 2 do
  local f = all[i]
  if f ~= 'kind' then
    local ttl = redis.call('pttl', pfx .. f)
    if ttl == -2 then
      redis.call('hdel', key, f)
    else
      if ttl < 0 then ttl = 0 end
      local o, m = string.sub(f, 1, -3), string.sub(f, -2)
      if o ~= owner then
        if m == ':w' then writer = true end
        if m == ':r' then readers = readers + 1 end
        if m == ':c' then
          if string.match(o, '^[^:]*:[^:]*') ~= client then
            claims = claims + 1
            claimttl = math.max(claimttl, ttl)
          end
        else
          blockttl = math.max(blockttl, ttl)
        end
      end
    end
  end
end

-- fit sets the hash's TTL to the longest live lease key.
local function fit()
  local best = 0
  local fs = redis.call('hgetall', key)
  for i = 1, #fs, 2 do
    if fs[i] ~= 'kind' then best = math.max(best, redis.call('pttl', pfx .. fs[i])) end
  end
  if best > 0 then redis.call('pexpire', key, best) end
end

local v = redis.call('hget', key, hf)
local count = 0
if v then count = tonumber(v) end

if count == expected + 1 or (count > 0 and count == expected) then
  if count == expected then count = redis.call('hincrby', key, hf, 1) end
  if expected == 0 then redis.call('set', lk, take_token(), 'keepttl') end
  if redis.call('pttl', lk) < lease then redis.call('pexpire', lk, lease) end
  if redis.call('pttl', key) < lease then redis.call('pexpire', key, lease) end
  return {1, count, tonumber(redis.call('get', lk) or '0')}
end
if count ~= expected then
  return {-1, count}
end

if mode == ':w' then
  if redis.call('hexists', key, owner .. ':r') == 1 then
    return {-3}
  end
  if writer or readers > 0 then
    if claimms > 0 then
      redis.call('hset', key, 'kind', 'rw', owner .. ':c', 1)
      redis.call('set', pfx .. owner .. ':c', 1, 'px', claimms)
      fit()
    end
    return {0, blockttl}
  end
elseif writer then
  return {0, blockttl}
elseif claims > 0 and redis.call('hexists', key, owner .. ':w') == 0 then
  -- Behind a waiting writer: look again when its claim would lapse, so that
  -- a dead writer holds readers up for at most its claim lease.
  return {0, claimttl}
end

local token = take_token()
redis.call('hset', key, 'kind', 'rw', hf, 1)
redis.call('set', lk, token, 'px', lease)
if mode == ':w' and redis.call('hdel', key, owner .. ':c') == 1 then
  redis.call('del', pfx .. owner .. ':c')
end
fit()
return {1, 1, token}
