--- @include "lib/core/keys"
--- @include "lib/groups/offer"

--- @per-call (reset at the start of every call: lua/functions.py)
local earliest_due = nil -- due time of the first delayed job (false: none), read once
--- @end

-- Put an id in the delayed set. An idle consumer sleeps until the earliest due time it
-- knows, so a new earliest one wakes a consumer to re-plan.
local function schedule(id, due)
  if earliest_due == nil then
    local first = redis.call('ZRANGE', K_DELAYED, 0, 0, 'WITHSCORES')
    earliest_due = tonumber(first[2]) or false
  end
  redis.call('ZADD', K_DELAYED, due, id)
  if earliest_due == false or due < earliest_due then
    earliest_due = due
    need_wake = true
  end
end
