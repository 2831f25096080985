--- @include "lib/core/keys"
--- @include "lib/core/record"
--- @include "lib/core/counters"
--- @include "lib/core/conf"
--- @include "lib/groups/slots"
--- @include "lib/groups/offer"
--- @include "lib/workflows/fan_in_dead"
--- @include "lib/control/job_control"

-- Dead-lettering: moving an active job to K_DEAD, and keeping K_DEAD within dead_cap.

local EVICT_SPARE = 100 -- evictions a call makes beyond one per dead-lettering

--- @per-call (reset at the start of every call: lua/functions.py)
local evict_spare = EVICT_SPARE -- left in this call
--- @end

-- Evict the oldest dead letters over the cap: one per dead-lettering, so the set never
-- grows past the cap, and up to EVICT_SPARE more per call (not per dead-lettering: a
-- batch of requeues is one call): after the cap is lowered, the excess goes over the
-- next dead-letterings, none of which grows with it. An evicted workflow step its
-- workflow waits for (policy "wait") fails that workflow (lib/workflows/fan_in_dead.lua
-- fan_in_gone: an outbox entry, O(1)).
local function enforce_dead_cap(now)
  local cap = get_conf().dead_cap
  if cap <= 0 then return end
  local over = redis.call('ZCARD', K_DEAD) - cap
  if over <= 0 then return end
  over = math.min(over, 1 + evict_spare)
  evict_spare = evict_spare - (over - 1)
  local popped = redis.call('ZPOPMIN', K_DEAD, over)
  local victims = {}
  for i = 1, #popped, 2 do
    victims[#victims + 1] = popped[i]
    fan_in_gone(popped[i], 'evicted', now)
  end
  redis.call('HDEL', K_JOBS, unpack(victims))
  redis.call('HDEL', K_REASONS, unpack(victims))
  -- job control data (lib/control/job_control.lua)
  redis.call('HDEL', K_PREFIX .. 'ctl', unpack(victims))
  redis.call('HDEL', K_PREFIX .. 'progress', unpack(victims))
  local steps = {} -- durable steps (lib/durable/steps.lua) go with the record
  for i = 1, #victims do steps[i] = K_PREFIX .. 'steps:' .. victims[i] end
  redis.call('DEL', unpack(steps))
  count('dead_evicted', #victims)
end

-- Dead-letter an active job; the caller has stored the reason.
local function kill(id, r, now)
  redis.call('ZADD', K_DEAD, now, id)
  redis.call('ZREM', K_ACTIVE, id)
  drop_slot(r)
  if bit.band(r.flags, FLAG_CONTROL) ~= 0 then control().finish(id, r, now, 'dead') end
  r.state = ST_DEAD
  r.flags = bit.band(r.flags, FLAG_CONTROL)
  redis.call('HSET', K_JOBS, id, rec_encode(r))
  count('dead_lettered', 1)
  fan_in_dead(id, r, now)
  enforce_dead_cap(now)
end
