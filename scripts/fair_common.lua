-- fair_common: the part every fair-lock script shares. scripts.go puts it in
-- front of fair_acquire.lua, fair_release.lua and fair_keepalive.lua, so the
-- three run the same queue logic (Lua scripts cannot call each other).
--
-- Keys of the fair lock NAME (all tagged {NAME}):
--   holdfast:{NAME}        hash: owner field -> reentry count of the holder;
--                          a granted waiter that has not confirmed yet has
--                          count 0; field "kind" = "fair" marks the kind.
--                          PEXPIRE = the holder's lease, or WaiterTimeout
--                          while a grant waits for its confirmation.
--   scripts.FenceKey(NAME) fencing counter, shared with every kind (see
--                          fence.lua, which scripts.go puts in front)
--   holdfast:{NAME}:q      hash: waiter field -> "SEQ:DEADLINE_MS" (arrival
--                          number, Redis time after which the waiter counts
--                          as dead); field "seq" is the arrival counter.
--                          PEXPIRE is only ever extended by the waiters'
--                          keep-alives: when every waiter is dead it expires.
--   holdfast:{NAME}:ch:CLIENTID  channel of one client: told the field of
--                          its waiter that was granted the lock.

-- now is Redis's clock in milliseconds. Scripts replicate their effects
-- (Redis 7), so reading it is allowed and replicas see the absolute times.
local function now_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- place parses a queue entry: arrival number and deadline.
local function place(v)
  local c = string.find(v, ':', 1, true)
  return tonumber(string.sub(v, 1, c - 1)), tonumber(string.sub(v, c + 1))
end

-- client is the CLIENTID:INSTANCE part of an owner field (scripts.Field;
-- neither part contains ':'): it names one Client, even among Clients that
-- share a ClientID.
local function client(field)
  local c = string.find(field, ':', 1, true)
  local d = string.find(field, ':', c + 1, true)
  if not d then return string.sub(field, 1, c - 1) end
  return string.sub(field, 1, d - 1)
end

-- extend sets key's TTL to at least ms.
local function extend(key, ms)
  if redis.call('pttl', key) < ms then redis.call('pexpire', key, ms) end
end

-- holders counts the owner fields of the hash H (granted or holding).
local function holders(H)
  local n = redis.call('hlen', H)
  if redis.call('hexists', H, 'kind') == 1 then n = n - 1 end
  return n
end

-- grant_next gives the free lock to the longest-waiting live waiter: dead
-- waiters (deadline passed) are dropped all at once, the first live one is
-- granted (count 0, to be confirmed within wt ms or by its place's own
-- deadline, whichever is later) and told on its client's channel. Returns
-- the granted field, or nil when no one waits.
local function grant_next(H, Q, now, wt, chprefix)
  local all = redis.call('hgetall', Q)
  local best, bestseq, bestdeadline
  for i = 1, #all, 2 do
    local f = all[i]
    if f ~= 'seq' then
      local seq, deadline = place(all[i + 1])
      if deadline <= now then
        redis.call('hdel', Q, f)
      elseif not bestseq or seq < bestseq then
        best, bestseq, bestdeadline = f, seq, deadline
      end
    end
  end
  if best then
    redis.call('hdel', Q, best)
    redis.call('hset', H, best, 0, 'kind', 'fair')
    -- The grant waits for its waiter at least as long as the waiter's place
    -- would have: the place's deadline comes from the waiter's own
    -- WaiterTimeout, which may be longer than the caller's (wt), and a
    -- waiter that missed the grant's message learns of it only at its next
    -- keep-alive, a third of its own WaiterTimeout after the last.
    redis.call('pexpire', H, math.max(wt, bestdeadline - now))
    redis.call('publish', chprefix .. client(best), best)
  end
  if redis.call('hlen', Q) <= 1 then redis.call('del', Q) end
  return best
end

-- granted returns the field granted the lock and not confirmed yet (count
-- 0), or nil.
local function granted(H)
  local all = redis.call('hgetall', H)
  for i = 1, #all, 2 do
    if all[i] ~= 'kind' and all[i + 1] == '0' then return all[i] end
  end
  return nil
end

-- wait_ms is how long a waiter that was not granted sleeps before it looks
-- again: until the hold ends (PTTL of H), at most wt. While a grant waits
-- for its grantee's confirmation (count 0), the next hold starts within
-- about a round trip, and the waiter must learn its lease in time to be at
-- hand when it ends (a fixed lease may run out unreleased, and nobody then
-- tells the queue): it looks again after a sixteenth of wt or a quarter of
-- its own lease, whichever is shorter (at least 10 ms), so a grantee that
-- never confirms costs each waiting process a few calls per wt.
local function wait_ms(H, wt, lease)
  local ms = redis.call('pttl', H)
  if ms > 0 and granted(H) then
    ms = math.max(10, math.min(ms, math.floor(wt / 16), math.floor(lease / 4)))
  end
  if ms < 0 or ms > wt then ms = wt end
  return ms
end

-- take makes field the holder: count 1, the lease, a new fencing token.
-- The hash's TTL becomes the lease, shorter or not: a grant waiting for its
-- confirmation kept the hash for WaiterTimeout, and a hold that outlived its
-- holder's lease in Redis would stall the queue behind it.
local function take(H, F, field, lease)
  redis.call('hset', H, field, 1, 'kind', 'fair')
  redis.call('pexpire', H, lease)
  local token = fence_take(F) -- the one place a fair grant takes its token
  return {1, 1, token}
end


-- tell_head: nobody announces a hold that expires unreleased: the head of
-- the queue learns of its end by looking (its retry timer is set for the
-- PTTL it was told, and it looks at least every third of its own
-- WaiterTimeout). A new hold whose lease could end before the head looks
-- again, which happens within half of what its place has left (its keep-alive
-- came at most a third of its WaiterTimeout ago), is announced to the head's
-- client, so that it looks now and learns the hold's PTTL. The queue's PTTL
-- bounds every place's deadline: with a lease that long (the common case) one
-- PTTL decides.
local function tell_head(Q, lease, chprefix)
  local qttl = redis.call('pttl', Q)
  if qttl < 0 or 2 * lease >= qttl then return end
  local now = now_ms()
  local all = redis.call('hgetall', Q)
  local best, bestseq, bestdeadline
  for i = 1, #all, 2 do
    if all[i] ~= 'seq' then
      local seq, deadline = place(all[i + 1])
      if deadline > now and (not bestseq or seq < bestseq) then
        best, bestseq, bestdeadline = all[i], seq, deadline
      end
    end
  end
  if best and 2 * lease < bestdeadline - now then
    redis.call('publish', chprefix .. client(best), best)
  end
end
