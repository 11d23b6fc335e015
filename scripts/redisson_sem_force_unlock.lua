-- redisson_sem_force_unlock: give back every permit of a semaphore kept as
-- Redisson keeps an RPermitExpirableSemaphore, whoever holds them
-- (Client.ForceUnlock under LayoutRedisson; keys in
-- redisson_sem_acquire.lua).
--
-- KEYS[1]  NAME
-- KEYS[2]  {NAME}:timeout
-- KEYS[3]  redisson_sc:{NAME}
--
-- Reply: 1 when the keys were a semaphore's with permits held, which are
-- now free (their lease records deleted, the free count raised by as many,
-- the new count published as a release publishes it); 0 otherwise, with
-- nothing changed. Redisson keeps no fencing counter for the kind: there is
-- no fence to raise.
local ft, lt = redis.call('type', KEYS[1]).ok, redis.call('type', KEYS[2]).ok
if lt ~= 'zset' or (ft ~= 'none' and ft ~= 'string') then return 0 end
local avail = redis.call('get', KEYS[1])
if avail and not string.match(avail, '^%-?%d+$') then return 0 end
local n = redis.call('zcard', KEYS[2])
redis.call('del', KEYS[2])
local free = redis.call('incrby', KEYS[1], n)
if free > 0 then redis.call('publish', KEYS[3], string.format('%d', free)) end
return 1
