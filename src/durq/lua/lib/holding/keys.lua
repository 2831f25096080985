--- @include "lib/core/keys"
--- @include "lib/core/counters"

-- The keys of the holding area (lib/holding/held.lua describes it). The `held` count in
-- the stats hash goes up when an id enters a held:<cap> and down when it leaves it,
-- whoever takes it out: a capable worker (unhold.lua), the grace (caps.lua), a cancel or
-- a workflow's stop (held_forget), or meeting an id whose job an older durq ended.
local HELD_INDEX = 'heldidx'

local function held_key(cap)
  return K_PREFIX .. 'held:' .. cap
end

-- The index entry of `cap` after jobs left its held:<cap>: when its oldest job left was
-- held, or no entry once none is left.
local function held_reindex(cap)
  local oldest = redis.call('ZRANGE', held_key(cap), 0, 0, 'WITHSCORES')
  if oldest[2] then
    redis.call('ZADD', K_PREFIX .. HELD_INDEX, oldest[2], cap)
  else
    redis.call('ZREM', K_PREFIX .. HELD_INDEX, cap)
  end
end

-- Held job `id` ends here (cancel.lua, a workflow's stop), before its reason is
-- rewritten: its id leaves its held:<cap> now, found through the capability its reason
-- names (hold.lua). An unreadable reason leaves the id, to be met later (held_left).
local function held_forget(id)
  local ok, reason = pcall(cjson.decode, redis.call('HGET', K_REASONS, id) or '')
  if not ok or type(reason) ~= 'table' or type(reason.task) ~= 'string' then return end
  local cap = reason.task
  if type(reason.version) == 'number' and reason.version ~= 1 then
    cap = cap .. '@' .. string.format('%d', reason.version)
  end
  -- pcall: garbage in these keys must not stop a cancel half-way (the id stays)
  if redis.pcall('ZREM', held_key(cap), id) == 1 then
    count('held', -1)
    pcall(held_reindex, cap)
  end
end
