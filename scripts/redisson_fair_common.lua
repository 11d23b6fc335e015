-- redisson_fair_common: the part the Redisson fair lock's scripts share
-- (scripts.go puts it in front of each). The keys are Redisson's
-- RFairLock's, so that Go and Java waiters queue in one line:
--
--   NAME                           hash: field ID:THREAD -> reentry count of the holder,
--                                  PEXPIRE = lease (as an RLock)
--   redisson_lock_queue:{NAME}     list: waiting fields, first come first
--   redisson_lock_timeout:{NAME}   sorted set: waiting field -> deadline, Unix ms; a
--                                  waiter at the head of the list whose deadline has
--                                  passed is dropped by the next script that looks
--   redisson_lock__channel:{NAME}:ID:THREAD  one waiter's channel: the integer 0 when
--                                  the lock is free and that waiter heads the list
--
-- Redisson's clients date deadlines from their own clocks; holdfast's
-- scripts from Redis's (TIME). A Java waiter's deadline is its
-- predecessor's plus its wait W (Redisson's fairLockWaitTimeout, or
-- tryLock's wait time), and a Java grant from the line takes the
-- grantee's W off every deadline left, as a Java waiter that gives up
-- takes its W off those behind it. A Go waiter's deadline is set by its
-- keep-alives: its WaiterTimeout (wt) from now, plus wt for each waiter
-- ahead of it. Go grants and departures take nothing off: a deadline
-- budgeted for other waits than the grantee's (clients with different
-- waits) would lose a live waiter its place. A live Go waiter keeps its
-- place as long as no Java grant takes more than its wt off per waiter
-- ahead (WaiterTimeout >= the Java clients' fairLockWaitTimeout); a dead
-- one leaves within wt per waiter that was ahead of it.

-- now_ms is Redis's clock in milliseconds.
local function now_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- other_kind: NAME, the list or the set holds something a fair lock's
-- keys cannot be (a string such as a semaphore's, an RReadWriteLock's hash
-- with its mode field, a key of another type).
local function other_kind(H, L, Z)
  local t = redis.call('type', H).ok
  if t ~= 'none' and (t ~= 'hash' or redis.call('hexists', H, 'mode') == 1) then return true end
  t = redis.call('type', L).ok
  if t ~= 'none' and t ~= 'list' then return true end
  t = redis.call('type', Z).ok
  return t ~= 'none' and t ~= 'zset'
end

-- prune drops the waiters at the head of the line whose deadline has
-- passed, as Redisson does: only from the front, one after the other.
local function prune(L, Z, now)
  while true do
    local head = redis.call('lindex', L, 0)
    if not head then return end
    local deadline = redis.call('zscore', Z, head)
    if not deadline or tonumber(deadline) > now then return end
    redis.call('zrem', Z, head)
    redis.call('lpop', L)
  end
end

-- wake tells the head of the line, on its own channel, that the lock is
-- free: Redisson's unlock message, 0.
local function wake(L, CH)
  local head = redis.call('lindex', L, 0)
  if head then redis.call('publish', CH .. ':' .. head, 0) end
end

-- leave takes field out of the line.
local function leave(L, Z, field)
  redis.call('zrem', Z, field)
  redis.call('lrem', L, 0, field)
end

-- refresh sets a Go waiter's deadline to at least wt from now plus wt for
-- each waiter ahead of it (ahead: its rank).
local function refresh(Z, field, now, wt, ahead)
  local want = now + (1 + ahead) * wt
  local cur = redis.call('zscore', Z, field)
  if not cur or tonumber(cur) < want then redis.call('zadd', Z, want, field) end
end
