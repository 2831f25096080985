--- @include "lib/core/keys"

-- Idle consumers and when their waits end (docs/decisions/idle-upkeep.md). Key, under
-- the queue's (or outbox's) prefix, so in its slot:
--   idlers  zset  consumer id -> when (ms, server time) the wait it plans after this
--                 call ends at the latest
-- A consumer with an id that finds nothing is listed with its plan (next_ms, else
-- IDLE_PLAN_MS: a worker's idle wait, protocol/calls.py IDLE_BLOCK, ends sooner) before
-- it blocks on the wake marker and on its own marker, <prefix>ring:<consumer>
-- (worker/alarm.py); a call that hands it jobs takes it off. A call that writes leases
-- which become the queue's earliest (nothing in K_ACTIVE ends sooner) makes sure one
-- listed consumer wakes by their end, for a holder that dies: unless one plans to, the
-- earliest planned one (and the next, in case it died) has its own marker rung, wakes,
-- and plans again knowing the lease. Entries planned for a time past are stale (the
-- consumer woke, or died): skipped, and dropped when a consumer is newly listed. Errors
-- (the key holds another type) are ignored: idle workers then find leases by their
-- upkeep's look. O(1) commands per call: ZREM and a ZRANGE when jobs are handed out,
-- plus a ZRANGEBYSCORE and up to two rings when their leases are the earliest; a ZADD
-- when none is (and a ZREMRANGEBYSCORE and a PEXPIRE when it lists a consumer anew).
-- After a dequeue call at `now` by consumer `me` ('' for none) that handed out
-- `handed` jobs under leases ending at `deadline`, or found nothing and will block until
-- `next_ms` from now at the latest (-1: nothing due). (One function: the scripts that
-- include it are at Lua's 200 locals.)
local function idlers_after(now, me, handed, deadline, next_ms)
  local PLAN_MS = 3605000 -- IDLE_BLOCK (3600 s) and a margin: no idle wait ends later
  local RING_TTL = 60000 -- as worker/alarm.py's RING_TTL_MS
  local KEY_TTL = 7200000 -- twice PLAN_MS
  local key = K_PREFIX .. 'idlers'
  if handed == 0 then
    if me == '' then return end
    local plan = PLAN_MS
    if next_ms >= 0 and next_ms < plan then plan = next_ms end
    if redis.pcall('ZADD', key, now + plan, me) == 1 then
      -- newly listed (one ZADD per wait otherwise): stale entries go, and the key
      -- lives two hours past the last consumer listed (a consumer listed all along then
      -- finds it gone and lists itself again, its waits meanwhile ending within
      -- PLAN_MS; its worker's upkeep looks at the leases)
      redis.pcall('ZREMRANGEBYSCORE', key, '-inf', '(' .. now)
      redis.pcall('PEXPIRE', key, KEY_TTL)
    end
    return
  end
  if me ~= '' then redis.pcall('ZREM', key, me) end
  local first = redis.call('ZRANGE', K_ACTIVE, 0, 0, 'WITHSCORES')
  if first[2] and tonumber(first[2]) < deadline then return end -- a lease ends sooner
  local planned = redis.pcall('ZRANGEBYSCORE', key, now, '+inf', 'WITHSCORES', 'LIMIT', 0, 2)
  if type(planned) ~= 'table' or not planned[2] or tonumber(planned[2]) <= deadline then
    return -- nobody idle, or one wakes in time
  end
  for i = 1, #planned, 2 do
    local ring = K_PREFIX .. 'ring:' .. planned[i]
    redis.pcall('ZADD', ring, 0, '0')
    redis.pcall('PEXPIRE', ring, RING_TTL)
    redis.pcall('ZADD', key, now - 1, planned[i]) -- woken: stale until it plans again
  end
end
