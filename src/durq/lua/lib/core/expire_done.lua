--- @include "lib/core/keys"
--- @include "lib/core/record"

-- Records kept after completion, superseded, cancelled and expired records, and dedup
-- tombstones are removed when their retention ends, a bounded number per call (each
-- write one variadic command).
local function expire_done(now, limit)
  local ids = redis.call('ZRANGEBYSCORE', K_DONE, '-inf', now, 'LIMIT', 0, limit)
  if #ids == 0 then return end
  redis.call('ZREM', K_DONE, unpack(ids))
  local raws = redis.call('HMGET', K_JOBS, unpack(ids))
  local gone, controlled = {}, {}
  for i = 1, #ids do
    local r = rec_decode(raws[i])
    if r and (r.state == ST_COMPLETED or r.state == ST_SUPERSEDED or r.state == ST_CANCELLED
        or r.state == ST_EXPIRED) then
      gone[#gone + 1] = ids[i]
      if bit.band(r.flags, FLAG_CONTROL) ~= 0 then -- job control data (lib/control/job_control.lua)
        controlled[#controlled + 1] = ids[i]
      end
    end
  end
  if #gone > 0 then
    redis.call('HDEL', K_JOBS, unpack(gone))
    redis.call('HDEL', K_REASONS, unpack(gone))
  end
  if #controlled > 0 then
    redis.call('HDEL', K_PREFIX .. 'ctl', unpack(controlled))
    redis.call('HDEL', K_PREFIX .. 'progress', unpack(controlled))
    -- durable steps (lib/durable/steps.lua) go with the record
    local steps = {}
    for i = 1, #controlled do steps[i] = K_PREFIX .. 'steps:' .. controlled[i] end
    redis.call('DEL', unpack(steps))
  end
end
