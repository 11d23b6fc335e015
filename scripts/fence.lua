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
-- A script that uses these helpers passes scripts.FenceKey(NAME) among its
-- KEYS, and calls:
--   fence_take(slot)            on every fresh grant: the new token
--   fence_peek(slot)            a token at least that of every grant so far
--                               (for a hold already granted: no later grant
--                               of the name gets less)
--   fence_raise(slot, at_least) make every later token of the name exceed
--                               at_least (a decimal string)

local function fence_take(slot)
  return redis.call('incr', slot)
end

local function fence_peek(slot)
  return tonumber(redis.call('get', slot) or '0')
end

local function fence_raise(slot, at_least)
  if fence_peek(slot) < tonumber(at_least) then
    redis.call('set', slot, at_least)
  end
end

