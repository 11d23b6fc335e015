-- elect_read: the state of the election at KEYS[1] (Client.Leader,
-- Client.Observe, Client.Inspect; layout in elect_acquire.lua). It changes
-- nothing.
--
-- KEYS[1]  election hash  holdfast:{NAME}
-- KEYS[2]  fair queue     holdfast:{NAME}:q
--
-- Replies:
--   {0}                               nobody leads (the name is free)
--   {-2}                              the name is in use as another kind of lock
--   {term, pttl, value, owner, count} the leader: its term, the remaining
--                                     lease in ms, its value, its owner field
--                                     and reentry count
-- The TTL and the state come from one atomic read, so pttl is the lease of
-- the leader shown.
local key = KEYS[1]
if redis.call('exists', KEYS[2]) == 1 then return {-2} end
local got = redis.pcall('hmget', key, 'kind', 'term', 'value', 'owner', 'count')
if got.err then return {-2} end
if got[1] ~= 'election' then
  if redis.call('exists', key) == 1 then return {-2} end
  return {0}
end
return {tonumber(got[2]), redis.call('pttl', key), got[3], got[4], tonumber(got[5])}
