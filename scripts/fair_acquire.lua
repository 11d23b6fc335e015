-- fair_acquire: take, confirm, re-enter or queue for the fair lock.
--
-- KEYS[1]  lock hash      holdfast:{NAME}
-- KEYS[2]  fence counter  scripts.FenceKey(NAME) (see fence.lua)
-- KEYS[3]  queue          holdfast:{NAME}:q
-- ARGV[1]  owner field    CLIENTID:INSTANCE:OWNER
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  the count the caller believes the owner holds (0 = fresh)
-- ARGV[4]  WaiterTimeout in milliseconds
-- ARGV[5]  take: take the lock if it is this owner's turn, or its
--          client's (a grant to another waiter of the same Client), else
--          keep or take a place in the queue;
--          try: take the lock if it is this owner's turn, else change nothing
--          (a try-once request);
--          place: only keep or take a place in the queue (a waiter behind
--          others of its own client, which confirms later, as the head)
-- ARGV[6]  channel prefix  holdfast:{NAME}:ch:
-- ARGV[7..] place mode: more owner fields to place after ARGV[1], in order;
--          take mode: the owner fields of the caller's client's live waiters
--          queued behind the caller (it asked before them)
--
-- Replies, as acquire.lua's:
--   {1, count, token}  granted (fresh, confirmed grant, reentry, or a repeat)
--   {0, ms}            not now: the owner waits in the queue (or only tried);
--                      ms bounds its sleep before it tries again
--   {-1, count}        the owner's count is not what the caller believes
--   {-2}               the name is in use as another kind of lock
--
-- A fresh request is granted only when the lock is free and nobody waits:
-- otherwise it queues behind every waiter (no barging). A waiter granted by
-- a release (count 0 in the hash) confirms here, and only here starts its
-- lease: its validity is dated from this call. Repeating a call that ran
-- answers the same (count is expected + 1), so timeouts are settled by
-- repeating.
local H, F, Q = KEYS[1], KEYS[2], KEYS[3]
local field, lease, expected = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local wt, mode, chprefix = tonumber(ARGV[4]), ARGV[5], ARGV[6]

-- take_and_tell takes the lock for field and tells the queue's head when
-- the new lease is short (tell_head).
local function take_and_tell()
  local reply = take(H, F, field, lease)
  tell_head(Q, lease, chprefix)
  return reply
end

-- pcall: a reentrant lock's key is a string, whose WRONGTYPE reply is no
-- 'fair' either.
if redis.call('exists', H) == 1 and redis.pcall('hget', H, 'kind') ~= 'fair' then
  return {-2}
end
local v = redis.call('hget', H, field)
local count = -1
if v then count = tonumber(v) end

if expected > 0 then
  if count == expected + 1 then
    extend(H, lease)
    return {1, count, fence_peek(F)}
  end
  if count ~= expected then return {-1, math.max(count, 0)} end
  count = redis.call('hincrby', H, field, 1)
  extend(H, lease)
  return {1, count, fence_peek(F)}
end

if mode == 'place' then
  -- Places only, for ARGV[1] and ARGV[7..] in that order: never take, never
  -- confirm (the head of the caller's local queue does). A field granted
  -- already (count 0) keeps its grant. A field that holds (count > 0: a
  -- hold its client does not know of, such as one a failover brought back,
  -- or one whose grant crossed this call) queues all the same, so that its
  -- waiter keeps its turn and the other fields of the batch theirs; the
  -- hold's final release drops the place with it.
  local now = now_ms()
  local fields = {field}
  for i = 7, #ARGV do fields[#fields + 1] = ARGV[i] end
  for _, f in ipairs(fields) do
    local mine = redis.call('hget', Q, f)
    if redis.call('hget', H, f) == '0' then
      -- granted already: the head will confirm; nothing to queue
    elseif mine then
      redis.call('hset', Q, f, place(mine) .. ':' .. (now + wt))
    else
      local seq = redis.call('hincrby', Q, 'seq', 1)
      redis.call('hset', Q, f, seq .. ':' .. (now + wt))
    end
  end
  extend(Q, wt)
  return {0, wait_ms(H, wt, lease)}
end
if count == 1 then
  -- A repeat of a grant that already ran.
  extend(H, lease)
  return {1, 1, fence_peek(F)}
end
if count > 1 then return {-1, count} end
if count == 0 then
  -- Granted by a release: confirm.
  return take_and_tell()
end
if mode == 'take' and #ARGV > 6 then
  -- A grant to a waiter queued behind the caller in its own client
  -- (ARGV[7..]) is the client's turn, and the caller, which asked before
  -- that waiter, takes it: Redis may hold the client's places out of their
  -- local order (calls that crossed, a place taken anew after a
  -- roll-back), and the waiter it granted may not learn of it before
  -- WaiterTimeout. That waiter goes back to the front of the queue, where
  -- it was. A grant to a field not listed (a waiter that gave up, whose
  -- place was left behind) is not taken: it passes on as any other.
  local g = granted(H)
  local behind = false
  if g and client(g) == client(field) then
    for i = 7, #ARGV do
      if ARGV[i] == g then behind = true end
    end
  end
  if behind then
    local now = now_ms()
    redis.call('hdel', H, g)
    redis.call('hdel', Q, field)
    redis.call('hset', Q, g, '0:' .. (now + wt))
    extend(Q, wt)
    return take_and_tell()
  end
end

local now = now_ms()
if redis.call('exists', H) == 0 and redis.call('exists', Q) == 1 then
  -- Free with waiters queued: their turn (the head's holder or grantee
  -- expired). The head may be this very owner.
  if grant_next(H, Q, now, wt, chprefix) == field then
    return take_and_tell()
  end
end
if redis.call('exists', H) == 0 and redis.call('exists', Q) == 0 then
  return take_and_tell()
end

local sleep = wait_ms(H, wt, lease)
local mine = redis.call('hget', Q, field)
if mine then
  local seq = place(mine)
  redis.call('hset', Q, field, seq .. ':' .. (now + wt))
  extend(Q, wt)
elseif mode == 'take' then
  local seq = redis.call('hincrby', Q, 'seq', 1)
  redis.call('hset', Q, field, seq .. ':' .. (now + wt))
  extend(Q, wt)
end
return {0, sleep}
