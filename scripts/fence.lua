-- fence: the fencing-token helpers every granting script shares. scripts.go
-- prepends this file to each script that grants a hold or raises a fence,
-- so the token rules live here only.
--
-- A name's tokens come from a counter shared by every name in its cluster
-- hash slot (scripts.FenceKey): at most 16,384 counters whatever the number
-- of names, each in the slot of the names it serves, so a script may touch
-- it with the name's lock key. Tokens increase strictly per name, not
-- densely: a grant of any name of the slot moves the counter.
--
-- Counters of holdfast versions before the slot counters were per name
-- (holdfast:{NAME}:fence, scripts.LegacyFenceKey). They are read as long as
-- they exist: a name's token is the larger of both, and the old counter is
-- deleted once the slot counter is past it.
--
-- A script that uses these helpers passes scripts.FenceKeys(NAME) — the slot
-- counter, then the old per-name counter — among its KEYS, and calls:
--   fence_take(slot, legacy)            on every fresh grant: the new token
--   fence_peek(slot, legacy)            a token at least that of every grant
--                                       so far (for a hold already granted:
--                                       no later grant of the name gets less)
--   fence_raise(slot, legacy, at_least) make every later token of the name
--                                       exceed at_least (a decimal string)

local function fence_take(slot, legacy)
  local token = redis.call('incr', slot)
  local old = redis.call('get', legacy)
  if old then
    if token <= tonumber(old) then
      redis.call('set', slot, old)
      token = redis.call('incr', slot)
    end
    redis.call('del', legacy)
  end
  return token
end

local function fence_peek(slot, legacy)
  local cur = tonumber(redis.call('get', slot) or '0')
  local old = tonumber(redis.call('get', legacy) or '0')
  if old > cur then return old end
  return cur
end

local function fence_raise(slot, legacy, at_least)
  if fence_peek(slot, legacy) < tonumber(at_least) then
    redis.call('set', slot, at_least)
    redis.call('del', legacy)
  end
end

