--- @include "lib/core/keys"
--- @include "lib/core/record"
--- @include "lib/core/counters"
--- @include "lib/groups/push"
--- @include "lib/groups/offer"

-- Make a job ready in its group: at the head when it is returning, else at the tail.
-- The id is placed before the record says so, so a failure cannot strand the job.
local function make_ready(id, r, head)
  group_push(r.group, id, r.prio, head)
  r.state = ST_PENDING
  -- callers give back any slot first (drop_slot); job control data stays
  -- (lib/control/job_control.lua)
  r.flags = bit.band(r.flags, FLAG_CONTROL)
  redis.call('HSET', K_JOBS, id, rec_encode(r))
  ready_add(r.group, 1)
  touch(r.group)
end
