--- @include "lib/core/keys"
--- @include "lib/core/record"
--- @include "lib/core/delayed"
--- @include "lib/groups/slots"
--- @include "lib/limits/active_cap"
--- @include "lib/control/job_control"

-- A durable sleep or wait parks its job (docs/durable.md): the job leaves its worker and
-- waits in K_DELAYED until `due`, like a defer, without counting the attempt its
-- delivery used; unlike a defer it gives its group slot back (a group limited to one
-- job goes on meanwhile) and leaves max_active's count (lib/limits/active_cap.lua). It
-- comes back to the head of its group. Nothing polls: dequeue promotes it when due, a
-- signal makes it ready at once (lib/durable/signal.lua).

-- When job `id` (record r) parked until `due` must be due: an expiry before `due` makes
-- it due then, so that its promotion ends it expired (job control: an expired job is
-- never handed out again).
local function durable_park_due(id, r, due)
  if bit.band(r.flags, FLAG_CONTROL) ~= 0 then
    local data = control().get(id)
    local e = data and tonumber(data.e)
    if e and e < due then return e end
  end
  return due
end

local function durable_park(id, r, due)
  if r.attempts > 0 then r.attempts = r.attempts - 1 end
  drop_slot(r)
  schedule(id, due)
  redis.call('ZREM', K_ACTIVE, id)
  r.state = ST_DELAYED
  r.flags = bit.bor(r.flags, FLAG_RETURNING + FLAG_CONTROL)
  redis.call('HSET', K_JOBS, id, rec_encode(r))
  cap_freed()
end

-- Held job `id` (record r) leaves its worker at a sleep or a wait: it ends cancelled when
-- its cancel was asked while it ran (it does not come back), else it parks until the due
-- time that `register` returns once it wrote where the job waits. The script's reply.
local function durable_leave(id, r, now, register)
  if bit.band(r.flags, FLAG_CANCEL) ~= 0 then
    control().end_cancelled(id, r, now)
    cap_freed()
    return {'cancelled'}
  end
  local due = register()
  durable_park(id, r, due)
  return {'parked', due}
end
