-- rw_force_unlock: free the read-write lock at KEYS[1] whoever holds it
-- (Client.ForceUnlock; layout in rw_acquire.lua).
--
-- KEYS[1]  lock hash      holdfast:{NAME}
-- KEYS[2]  fence counter  scripts.FenceKey(NAME) (see fence.lua)
-- ARGV[1]  the lock's pub/sub channel
--
-- Reply: 1 when the name was in use as a read-write lock and is now free
-- (every hold, claim and lease key deleted, the fence raised, waiters told);
-- 0 otherwise, with nothing changed.
-- pcall: a reentrant lock's key is a string (WRONGTYPE): not ours.
if redis.pcall('hget', KEYS[1], 'kind') ~= 'rw' then return 0 end
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields, 2 do
  if fields[i] ~= 'kind' then redis.call('del', KEYS[1] .. ':rw:' .. fields[i]) end
end
redis.call('del', KEYS[1])
fence_take(KEYS[2])
redis.call('publish', ARGV[1], 'released')
return 1
