--- @include "lib/core/keys"
--- @include "lib/core/counters"
--- @include "lib/core/reason"

-- A record that cannot be read: its bytes stay in K_JOBS for inspection and its id is
-- listed as a dead letter, so nothing disappears silently and the queue keeps working.
local function quarantine(id, now, where)
  redis.call('ZADD', K_DEAD, now, id)
  redis.call('ZREM', K_ACTIVE, id)
  redis.call('ZREM', K_DELAYED, id)
  set_reason(id, {reason = 'corrupt_record', at = now,
    message = 'the stored record is unreadable (found in ' .. where .. ')'})
  count('corrupt', 1)
end
