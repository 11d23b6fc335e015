-- redisson_fair_wake: after Client.ForceUnlock freed NAME under the
-- Redisson layout, tell the head of its fair line, as Redisson's
-- RFairLock.forceUnlock does (layout in redisson_fair_common.lua).
--
-- KEYS[1]  lock hash       NAME
-- KEYS[2]  line            redisson_lock_queue:{NAME}
-- KEYS[3]  deadlines       redisson_lock_timeout:{NAME}
-- KEYS[4]  channel prefix  redisson_lock__channel:{NAME}
--
-- Reply: 1 when a waiter was told, 0 otherwise (nothing changed but dead
-- heads dropped).
local H, L, Z, CH = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
if other_kind(H, L, Z) or redis.call('exists', H) == 1 then return 0 end
prune(L, Z, now_ms())
if redis.call('llen', L) == 0 then return 0 end
wake(L, CH)
return 1
