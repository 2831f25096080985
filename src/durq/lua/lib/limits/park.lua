--- @include "lib/core/keys"
--- @include "lib/limits/conf"
--- @include "lib/groups/offer"

-- A group over its rate (or paused by a task) is parked: it leaves K_RR for the park zset
-- (group -> when it may start again) but keeps its K_RRSET membership, so offers
-- (enqueues, freed slots) leave it alone while it waits. When its time comes, dequeue
-- lists it again: the same path as any group offered to the rotation.
local PARK_MAX = 100     -- parked groups brought back per dequeue at most
-- ms an alarm outlives its time: void for claims once past, it stays for the looks of
-- idle workers (worker/upkeep.py, once per IDLE_HEARTBEAT, 10 min), which wake a consumer
-- for a past alarm whose holder died: its parked work then waits at most that long, not
-- until some consumer's idle wait ends (up to an hour)
local ALARM_SLACK = 660000

local function park_group(g, at)
  redis.call('ZADD', K_PREFIX .. 'park', at, g)
  local f = get_flow()
  if not f.parks then -- groups may be parked: dequeue keeps looking (lib/limits/conf.lua)
    f.parks = true
    redis.call('HSET', K_PREFIX .. 'flow', 'parks', 1)
  end
end

-- Bring back the parked groups whose time has come; returns how many.
local function unpark_due(now)
  local pk = K_PREFIX .. 'park'
  local due = redis.call('ZRANGEBYSCORE', pk, '-inf', now, 'LIMIT', 0, PARK_MAX)
  if #due == 0 then return 0 end
  redis.call('ZREM', pk, unpack(due))
  redis.call('RPUSH', K_RR, unpack(due))
  redis.call('SADD', K_RRSET, unpack(due)) -- a no-op unless K_RRSET was rebuilt meanwhile
  return #due
end

-- Take group g out of the park now (its rate changed): listed again if it was parked.
local function unpark(g)
  if redis.call('ZREM', K_PREFIX .. 'park', g) == 1 then
    redis.call('RPUSH', K_RR, g)
    redis.call('SADD', K_RRSET, g)
    need_wake = true
  end
end

-- Take up to `n` parked groups back to the rotation, their pauses ended (their limiter
-- states go: a TAT in the future would park them again as a pause). Once none is left,
-- the queue pays nothing for flow control any more; returns whether that is so.
local function release_parked(n)
  local pk = K_PREFIX .. 'park'
  local parked = redis.call('ZRANGE', pk, 0, n - 1)
  if #parked > 0 then
    redis.call('ZREM', pk, unpack(parked))
    redis.call('RPUSH', K_RR, unpack(parked))
    redis.call('SADD', K_RRSET, unpack(parked))
    redis.call('HDEL', K_PREFIX .. 'gtat', unpack(parked))
    need_wake = true
  end
  if redis.call('EXISTS', pk) == 1 then return false end
  redis.call('DEL', K_PREFIX .. 'gtat')
  -- qfan (lib/limits/queue_pause.lua) goes with the pause: a later, shorter one is sent again
  redis.call('HDEL', K_PREFIX .. 'flow', 'parks', 'tat', 'sec', 'cur', 'prev', 'qfan')
  return true
end

-- Every limit was removed: the parked groups go back to the rotation and the pauses
-- end. Up to 1000 parked groups in this call; the marker parks = 'release' has each
-- dequeue bring back PARK_MAX more until none is left (lib/limits/gate_hooks.lua).
local function unpark_all()
  if not release_parked(1000) then redis.call('HSET', K_PREFIX .. 'flow', 'parks', 'release') end
end

-- When the first parked group may start again (ms), or nil.
local function earliest_park()
  local first = redis.call('ZRANGE', K_PREFIX .. 'park', 0, 0, 'WITHSCORES')
  return tonumber(first[2])
end

-- True when K_RRSET holds only parked groups: K_RR being empty is then no sign that
-- something deleted it (dequeue's repair must not list parked groups again).
local function only_parked_listed()
  if not get_flow().on then return false end
  return redis.call('SCARD', K_RRSET) <= redis.call('ZCARD', K_PREFIX .. 'park')
end

-- After dequeue's repair emptied K_RRSET: the parked groups go back in it first, so the
-- repair's offers leave them parked.
local function relist_parked()
  if not get_flow().on then return end
  local parked = redis.call('ZRANGE', K_PREFIX .. 'park', 0, 999)
  if #parked > 0 then redis.call('SADD', K_RRSET, unpack(parked)) end
end

-- The alarm: when parked work may start at `at`, one idle consumer plans to wake then
-- and the others leave it out of their plans (no herd). The consumer holding the alarm
-- keeps it when it plans again; a consumer without an id ('') always plans it.
local function alarm_holder(now, at)
  local raw = redis.call('GET', K_PREFIX .. 'alarm')
  if not raw then return nil end
  local when, who = string.match(raw, '^(%d+)|(.*)$')
  when = tonumber(when)
  -- void once past (its holder woke, or died: then the next consumer to look takes over)
  if not when or when <= now or when > at then return nil end
  return who, when
end

-- The time consumer `me`, about to wait, should wake for parked work due at `at`; nil
-- when another consumer holds the alarm for it.
local function claim_alarm(now, at, me)
  if me == '' then return at end
  local who, when = alarm_holder(now, at)
  if who == me then return when end
  if who then return nil end
  redis.call('SET', K_PREFIX .. 'alarm', at .. '|' .. me, 'PX', at - now + ALARM_SLACK)
  return at
end
