--- @include "lib/core/clock"

-- The part of a call's work that may wait for the next call (dequeue's upkeep: expired
-- leases, due delayed jobs, the ticks of periodic schedules, stale ids) stops once the
-- call has run BUDGET_MS of processor time, so that no backlog makes one call long: a
-- catch-up of 100,000 ticks once ran 1.2 s in one dequeue, blocking every client of the
-- server (issue 30). Each kind of upkeep still does at least one item per call, and the
-- call tells its consumer to come back at once (and wakes another) when some is left.
-- The clock is os.clock (Redis 7+, Valkey: the server's processor time, so a server
-- descheduled by a busy machine does not cut the work short), or on Redis 6.2, which has
-- no os library, TIME (a 6.2 script reads it unfrozen: Redis 7 and Valkey give a script
-- one TIME for its whole run).
local BUDGET_MS = 0.5

--- @per-call (reset at the start of every call: lua/functions.py)
local budget_from = nil -- the clock (ms) when the call's budget started
--- @end

-- True once the call has run its budget, or `limit` ms when given; the first question, at the
-- start of the call, starts the clock (and is false). (Few locals: dequeue's script is
-- near Lua's 200 a function may hold.)
local function budget_spent(limit)
  local t
  local os_lib = rawget(_G, 'os')
  if os_lib then
    t = os_lib.clock() * 1000
  else
    local now = redis.call('TIME')
    t = tonumber(now[1]) * 1000 + tonumber(now[2]) / 1000
  end
  if not budget_from then
    budget_from = t
    return false
  end
  return t - budget_from > (limit or BUDGET_MS)
end
