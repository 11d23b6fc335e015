-- force_unlock: free the reentrant lock at KEYS[1] whoever holds it
-- (Client.ForceUnlock, an operator's tool).
--
-- KEYS[1]  lock hash      holdfast:{NAME}
-- KEYS[2]  fence counters scripts.FenceKeys(NAME): the slot counter, then the
-- KEYS[3]                 old per-name counter (see fence.lua)
-- ARGV[1]  the lock's pub/sub channel
--
-- Reply: 1 when a hold was removed, 0 when the name was free or in use as
-- another kind (nothing changed).
--
-- The fence goes up so that any token the old holder hands out from now on is
-- lower than the next grant's, and a resource that saw this bump's value can
-- refuse it at once. The old holder learns of the removal at its next renewal
-- (its field is gone) and ends with Lost. Waiters are told, as on a release.
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], 'kind') == 1 then return 0 end
redis.call('del', KEYS[1])
fence_take(KEYS[2], KEYS[3])
redis.call('publish', ARGV[1], 'released')
return 1
