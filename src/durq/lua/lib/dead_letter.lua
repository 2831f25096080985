--- @include "lib/keys"
--- @include "lib/record"
--- @include "lib/counters"
--- @include "lib/conf"
--- @include "lib/slots"
--- @include "lib/offer"
--- @include "lib/fan_in_dead"
--- @include "lib/control"

-- Dead-lettering: moving an active job to K_DEAD, and keeping K_DEAD within dead_cap.

-- Evict the oldest dead letters over the cap, at most 100 at a time: after the cap is
-- lowered, the excess goes over the next dead-letterings, none of which grows with it.
-- An evicted workflow step its workflow waits for (policy "wait") fails that workflow
-- (lib/fan_in_dead.lua fan_in_gone: an outbox entry, O(1)).
local function enforce_dead_cap(now)
  local cap = get_conf().dead_cap
  if cap <= 0 then return end
  local over = redis.call('ZCARD', K_DEAD) - cap
  if over > 100 then over = 100 end
  for _ = 1, over do
    local victim = redis.call('ZPOPMIN', K_DEAD)[1]
    fan_in_gone(victim, 'evicted', now)
    redis.call('HDEL', K_JOBS, victim)
    redis.call('HDEL', K_REASONS, victim)
    redis.call('HDEL', K_PREFIX .. 'ctl', victim) -- job control data (lib/control.lua)
    redis.call('HDEL', K_PREFIX .. 'progress', victim)
    count('dead_evicted', 1)
  end
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
