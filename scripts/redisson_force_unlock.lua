-- redisson_force_unlock: free a lock kept as Redisson keeps an RLock or an
-- RReadWriteLock, whoever holds it (Client.ForceUnlock under LayoutRedisson).
--
-- KEYS[1]  NAME
-- KEYS[2]  redisson_lock__channel:{NAME}
-- KEYS[3]  redisson_rwlock:{NAME}
-- KEYS[4]  redisson_lock_token:{NAME}
--
-- Reply: 1 when NAME was a lock hash and is now deleted, 0 otherwise (nothing
-- changed). As Redisson's forceUnlock: an RLock publishes 0 on its channel, a
-- read-locked RReadWriteLock 0 and a write-locked one 1 on the rwlock
-- channel. Beyond Redisson, the token counter is raised, so that the old
-- holder's fencing token is stale.
if redis.call('type', KEYS[1]).ok ~= 'hash' then return 0 end
local mode = redis.call('hget', KEYS[1], 'mode')
redis.call('del', KEYS[1])
redis.call('incr', KEYS[4])
if mode == 'write' then
  redis.call('publish', KEYS[3], 1)
elseif mode then
  redis.call('publish', KEYS[3], 0)
else
  redis.call('publish', KEYS[2], 0)
end
return 1
