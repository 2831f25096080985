--[[ job: everything stored about one job. Read only.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  id
Returns  {record or false, reason or false, lease_deadline or false, due or false,
          died_at or false, retained_until or false, now, control or false,
          progress or false, errors}: control and progress are the job control data
          (lib/control/job_control.lua); errors its error ring, HGETALL's flat list of
          its last failures, in no order (lib/core/attempt_errors.lua), empty when none
Errors   DURQ_WRONGTYPE when a durq key holds another Redis type
Cost     O(1).
]]
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/types"
--- @include "lib/core/attempt_errors"

local problem = keys_error({'jobs', 'reasons', 'active', 'delayed', 'dead', 'done', 'ctl',
  'progress'})
local id = ARGV[1]
problem = problem or attempt_errors_type_error(id)
if problem then return wrongtype(problem) end

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
  redis.call('HGETALL', attempt_errors_key(id)),
}
