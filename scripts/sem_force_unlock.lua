-- sem_force_unlock: free every permit of the semaphore at KEYS[1] whoever
-- holds them (Client.ForceUnlock; layout in sem_acquire.lua).
--
-- KEYS[1]  lock hash      holdfast:{NAME}
-- KEYS[2]  fence counter  scripts.FenceKey(NAME) (see fence.lua)
-- ARGV[1]  the semaphore's pub/sub channel
--
-- Reply: 1 when the name was in use as a semaphore and is now free (every
-- permit and lease key deleted, the fence raised, waiters told); 0
-- otherwise, with nothing changed.
-- pcall: a reentrant lock's key is a string (WRONGTYPE): not ours.
if redis.pcall('hget', KEYS[1], 'kind') ~= 'semaphore' then return 0 end
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields, 2 do
  local f = fields[i]
  if f ~= 'kind' and f ~= 'permits' and f ~= 'next' then redis.call('del', KEYS[1] .. ':sem:' .. f) end
end
redis.call('del', KEYS[1])
fence_take(KEYS[2])
redis.call('publish', ARGV[1], 'released')
return 1
