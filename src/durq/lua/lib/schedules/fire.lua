--- @include "lib/schedules/keys"
--- @include "lib/core/counters"
--- @include "lib/core/enqueue_one"

-- Enqueue the job of one tick: its id is the schedule's name and the tick time (with a
-- suffix for a manual trigger), its payload the stored head completed by the tick time.
local function sch_fire(s, tick, now, suffix)
  local id = 'sched:' .. s.name .. '@' .. ms(tick) .. (suffix or '')
  enqueue_one(now, id, s.head .. ms(tick) .. '}]', 0, 0, s.maxatt, SCH_CODEC_JSON, '', '',
    '0')
  s.current = id
  redis.call('HSET', sch_key(s.name), 'current', id, 'last_tick', ms(tick), 'last_at', ms(now))
  redis.call('HINCRBY', sch_key(s.name), 'fired', 1)
  count('ticks_fired', 1)
  return id
end
