--[[ job: everything stored about one job. Read only.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  id
Returns  {record or false, reason or false, lease_deadline or false, due or false,
          died_at or false, retained_until or false, now, control or false,
          progress or false}: control and progress are the job control data
          (lib/control/job_control.lua)
Errors   DURQ_WRONGTYPE when a durq key holds another Redis type
Cost     O(1).
]]
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/types"

local problem = keys_error({'jobs', 'reasons', 'active', 'delayed', 'dead', 'done', 'ctl',
  'progress'})
if problem then return wrongtype(problem) end

local id = ARGV[1]
return {
  redis.call('HGET', K_JOBS, id),
  redis.call('HGET', K_REASONS, id),
  redis.call('ZSCORE', K_ACTIVE, id),
  redis.call('ZSCORE', K_DELAYED, id),
  redis.call('ZSCORE', K_DEAD, id),
  redis.call('ZSCORE', K_DONE, id),
  now_ms(),
  redis.call('HGET', K_PREFIX .. 'ctl', id),
  redis.call('HGET', K_PREFIX .. 'progress', id),
}
