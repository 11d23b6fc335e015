-- elect_acquire: campaign for, or re-enter, the leadership of the election
-- at KEYS[1] for one owner (Client.Elect).
--
-- KEYS[1]  election hash  holdfast:{NAME}
--          field kind   -> "election" (marks the name as an election)
--          field owner  -> CLIENTID:INSTANCE:OWNER of the leader
--          field count  -> the leader's reentry count
--          field value  -> what the leader announced (Client.Elect's value)
--          field term   -> the leader's term: the fencing token of its grant
--          PEXPIRE = the leader's lease
-- KEYS[2]  fence counter  scripts.FenceKey(NAME) (see fence.lua)
-- KEYS[3]  fair queue     holdfast:{NAME}:q   only read: a name queued as fair is not ours
-- ARGV[1]  owner field    CLIENTID:INSTANCE:OWNER
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  the count the caller believes the owner holds (0 = fresh)
-- ARGV[4]  value          announced with the leadership (a fresh grant only)
-- ARGV[5]  the election's pub/sub channel
--
-- The hash exists exactly while someone leads. A grant tells the channel
-- "leader:TERM:VALUE" (release and expiry: see elect_release.lua), so
-- observers and waiting candidates of every process hear of it in one
-- message. Candidates keep nothing in Redis: they retry when a message
-- comes, or at the leader's PTTL at the latest.
--
-- The name's key is read with redis.pcall: a key of another kind that is not
-- a hash (a string, say) answers WRONGTYPE, which refuses the call like any
-- key without kind=election.
--
-- Replies (as acquire.lua's):
--   {1, count, term}   leading; term is the fencing token of the grant
--                      (a reentry or a repeat answers the stored term)
--   {0, pttl}          another owner leads; pttl bounds the caller's sleep
--   {-1, count}        the owner's count is not what the caller believes
--                      (for expected > 0 and count 0: leadership is gone)
--   {-2}               the name is in use as another kind of lock: nothing changed
--
-- The call is idempotent: a repeat of a grant that already ran (count is
-- expected + 1) answers the same grant again. The TTL is only ever extended.
local key, f = KEYS[1], ARGV[1]
local lease, expected = tonumber(ARGV[2]), tonumber(ARGV[3])
if #f == 0 or #ARGV[4] == 0 then
  return redis.error_reply('ERR elect_acquire: empty owner field or value')
end
if redis.call('exists', KEYS[3]) == 1 then return {-2} end
local got = redis.pcall('hmget', key, 'kind', 'owner', 'count', 'term')
if got.err then return {-2} end
local leader = false
if got[1] == 'election' then
  leader = got[2]
elseif redis.call('exists', key) == 1 then
  return {-2}
end

local count = 0
if leader == f then count = tonumber(got[3] or '0') end
if count > 0 and (count == expected + 1 or count == expected) then
  if count == expected then count = redis.call('hincrby', key, 'count', 1) end
  if redis.call('pttl', key) < lease then redis.call('pexpire', key, lease) end
  return {1, count, tonumber(got[4])}
end
if count ~= expected then
  return {-1, count}
end
if leader then
  return {0, redis.call('pttl', key)}
end

local term = fence_take(KEYS[2])
redis.call('del', key) -- a marked hash without a leader is no state to keep
redis.call('hset', key, 'kind', 'election', 'owner', f, 'count', 1, 'value', ARGV[4], 'term', term)
redis.call('pexpire', key, lease)
redis.call('publish', ARGV[5], 'leader:' .. term .. ':' .. ARGV[4])
return {1, 1, term}
