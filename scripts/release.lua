-- release: give back one reentry of an owner's hold, or all of it.
--
-- KEYS[1]  lock key     holdfast:{NAME} (layout in acquire.lua)
-- ARGV[1]  owner field  CLIENTID:INSTANCE:OWNER
-- ARGV[2]  the count the caller believes the owner holds before this release;
--          0 removes the owner's hold whatever its count (abandon)
-- ARGV[3]  the lock's pub/sub channel, told when the lock becomes free and
--          someone waits: the hold carries the waiter mark, or ARGV[4] is "1"
-- ARGV[4]  "1" when the caller has waiters of its own on the name (they listen
--          for this release); "0" otherwise
--
-- Replies:
--   n >= 0  the owner's count after the release; 0 means the owner holds nothing
--   -1      the owner holds nothing here (expired, deleted, taken over, in use
--           as another kind, or a retry of a final release that already ran);
--           nothing changed
--   -2      the owner's count is not what the caller believes; nothing changed
--
-- A retry of a release that already ran (count is expected - 1) changes nothing
-- and answers the same count again, so releases are safe to repeat.
local v = redis.pcall('get', KEYS[1])

-- The common final release: expected 1 and the owner's hold of count 1,
-- [w]1:TOKEN:FIELD. Two finds tell it without the captures, tonumbers and
-- string compare of the general path below (a plain find of the field where
-- it must start, at the only place it fits), and answer as that path would.
if ARGV[2] == '1' and type(v) == 'string' then
  local _, j = string.find(v, '^w?1:%d+:')
  if j and #v - j == #ARGV[1] and string.find(v, ARGV[1], j + 1, true) then
    redis.call('del', KEYS[1])
    if string.byte(v) == 119 or ARGV[4] == '1' then -- 119: the mark, "w"
      redis.call('publish', ARGV[3], 'released')
    end
    return 0
  end
end

if type(v) == 'table' and string.sub(v.err, 1, 9) ~= 'WRONGTYPE' then return v end
if type(v) ~= 'string' then return -1 end
local mark, count, token, owner = string.match(v, '^(w?)(%d+):(%d+):(.*)$')
if not owner then return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds a string no holdfast script wrote') end
if owner ~= ARGV[1] then return -1 end
count = tonumber(count)
local expected = tonumber(ARGV[2])

if expected ~= 0 and count ~= expected then
  if count == expected - 1 then return count end
  return -2
end

if expected ~= 0 and count > 1 then
  count = count - 1
  redis.call('set', KEYS[1], string.format('%s%d:%s:%s', mark, count, token, owner), 'keepttl')
  return count
end
redis.call('del', KEYS[1])
if mark == 'w' or ARGV[4] == '1' then
  redis.call('publish', ARGV[3], 'released')
end
return 0
