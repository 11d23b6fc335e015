-- redisson_fair_acquire: take, re-enter or queue for a fair lock kept as
-- Redisson keeps an RFairLock (layout in redisson_fair_common.lua).
--
-- KEYS[1]  lock hash       NAME
-- KEYS[2]  line            redisson_lock_queue:{NAME}
-- KEYS[3]  deadlines       redisson_lock_timeout:{NAME}
-- KEYS[4]  token counter   redisson_lock_token:{NAME}
-- KEYS[5]  channel prefix  redisson_lock__channel:{NAME}
-- ARGV[1]  owner field     ID:THREAD
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  the count the caller believes the owner holds (0 = fresh)
-- ARGV[4]  WaiterTimeout in milliseconds
-- ARGV[5]  take: take the lock if the owner heads the line (or a waiter
--          of its own client behind it does, ARGV[6..]), else keep or take
--          its place; try: take it if so, else change nothing; place: keep
--          or take places for ARGV[1] and ARGV[6..], in order
-- ARGV[6..] see ARGV[5]
--
-- Replies, as redisson_acquire.lua's:
--   {1, count, token}  granted (fresh, reentry, or the repeat of a grant)
--   {0, ms}            not now; ms bounds the sleep before looking again
--   {-1, count}        the owner's count is not what the caller believes
--   {-2}               the name's keys are another kind's
--
-- A fresh grant, as Redisson's: the hash is gone and the line is empty or
-- headed by the owner, who leaves the line (the deadlines left stay as
-- they are; see redisson_fair_common.lua). Tokens come from RFencedLock's counter, INCRed by
-- every Go grant (Redisson's fair lock has no counter of its own).
local H, L, Z, T, CH = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local field, lease, expected = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local wt, mode = tonumber(ARGV[4]), ARGV[5]

local function peek()
  return tonumber(redis.call('get', T) or '0')
end

-- seq splits a Go field ID:N into its client's ID and N, when N counts
-- the client's anonymous requests (short: owner fields are 19 digits).
local function seq(f)
  local id, n = string.match(f, '^(.*):(%d+)$')
  if n and #n <= 15 then return id, tonumber(n) end
  return nil
end

-- place keeps f's place, or takes one at the end of the line; but ahead of
-- the places of its own client's later requests (larger N), which calls
-- that crossed on their way may have put there first: the client listens
-- on the channel of its earliest waiter only.
local function place(f, now)
  local pos = redis.call('lpos', L, f)
  if not pos then
    local id, n = seq(f)
    local before
    if id then
      for _, g in ipairs(redis.call('lrange', L, 0, -1)) do
        local gid, gn = seq(g)
        if gid == id and gn > n then
          before = g
          break
        end
      end
    end
    if before then
      redis.call('linsert', L, 'before', before, f)
      pos = redis.call('lpos', L, f)
    else
      pos = redis.call('rpush', L, f) - 1
    end
  end
  refresh(Z, f, now, wt, pos)
end

-- sleep: until the hold ends, or, the lock being free, until the head's
-- deadline passes (the head may be gone); at most wt.
local function sleep(now)
  local ms = redis.call('pttl', H)
  if ms < 0 then
    ms = wt
    local head = redis.call('lindex', L, 0)
    local deadline = head and redis.call('zscore', Z, head)
    if deadline then ms = math.max(1, tonumber(deadline) - now + 1) end
  end
  return math.min(ms, wt)
end

if other_kind(H, L, Z) then return {-2} end
local now = now_ms()
prune(L, Z, now)
if mode == 'place' then
  -- Places only, never a grant: a field that holds (a hold its client
  -- does not know of, or one whose grant crossed this call) queues all the
  -- same, and its final release takes the place away with it.
  place(field, now)
  for i = 6, #ARGV do place(ARGV[i], now) end
  return {0, sleep(now)}
end
local v = redis.call('hget', H, field)
local count = 0
if v then count = tonumber(v) end

if expected > 0 or count == 1 then
  if count == expected + 1 or (count > 0 and count == expected) then
    if count == expected then count = redis.call('hincrby', H, field, 1) end
    if redis.call('pttl', H) < lease then redis.call('pexpire', H, lease) end
    return {1, count, peek()}
  end
  return {-1, count}
end
if count > 1 then return {-1, count} end

if redis.call('exists', H) == 0 then
  local head = redis.call('lindex', L, 0)
  local turn = not head or head == field
  -- A turn of a waiter of the caller's own client queued behind it is the
  -- caller's (it asked first; Redis may hold the client's places out of
  -- their local order). That waiter keeps the head of the line.
  for i = 6, #ARGV do
    if mode == 'take' and ARGV[i] == head then turn = true end
  end
  if turn then
    leave(L, Z, field)
    redis.call('hset', H, field, 1)
    redis.call('pexpire', H, lease)
    return {1, 1, redis.call('incr', T)}
  end
end
if mode == 'take' then place(field, now) end
return {0, sleep(now)}
