-- fence_raise: raise the fencing counter of a name to at least a floor.
--
-- KEYS[1]  lock key       holdfast:{NAME} (unused: the keys are GrantKeys(NAME))
-- KEYS[2]  fence counter  scripts.FenceKey(NAME), the slot counter (see fence.lua)
-- ARGV[1]  floor T        the highest token a RedLock majority returned
--
-- Reply: the name's fence after the call (>= T): fence_peek.
--
-- A RedLock holder raises the counter on every node that granted it, so that
-- the next grant on any of those nodes returns more than T, whatever its own
-- counter said before. The counter is only ever raised, never lowered, so the
-- call is idempotent and safe to repeat after a timeout. How the counter is
-- stored is fence.lua's business (fence_raise), which scripts.go puts in front.
fence_raise(KEYS[2], ARGV[1])
return fence_peek(KEYS[2])
