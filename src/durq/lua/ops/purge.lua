--[[ purge: delete dead letters for good.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  mode: 'ids' (the ids given) or 'oldest' (the oldest `limit` dead letters)
ARGV[2]  limit (mode 'oldest')
ARGV[3..] ids (mode 'ids')
Returns  {id_1, status_1, ...}: OK or NOT_DEAD.
         A purged workflow step that its workflow waits for (policy "wait") cannot be
         replayed any more: its link (<queue>wfl) goes and an outbox entry ('D', reason
         "purged", lib/workflows/fan_in_dead.lua fan_in_gone) fails the workflow in its home slot.
Errors   DURQ_WRONGTYPE when a durq key holds another Redis type, before any change
Cost     O(ids or limit) commands (a few more per purged workflow step: the workflow's
         failure is applied by the outbox's delivery, not here); "purge all" is a loop of
         bounded calls.
]]
--- @include "lib/core/status"
--- @include "lib/core/keys"
--- @include "lib/core/dead_ids"
--- @include "lib/core/types"
--- @include "lib/core/clock"
--- @include "lib/workflows/fan_in_dead"

local problem = keys_error({'dead', 'jobs', 'reasons', 'ctl', 'progress'})
  or type_error(K_PREFIX .. WF_LINKS, 'hash')
if problem then return wrongtype(problem) end
local now = now_ms()
local linked = redis.call('EXISTS', K_PREFIX .. WF_LINKS) == 1 -- none: no step to look up
local ids = asked_dead_ids()
local out = {}
local purged = 0
for i = 1, #ids do
  local id = ids[i]
  if redis.call('ZREM', K_DEAD, id) == 1 then
    if linked then fan_in_gone(id, 'purged', now) end
    redis.call('HDEL', K_JOBS, id)
    redis.call('HDEL', K_REASONS, id)
    redis.call('HDEL', K_PREFIX .. 'ctl', id) -- job control data (lib/control/job_control.lua)
    redis.call('HDEL', K_PREFIX .. 'progress', id)
    redis.call('DEL', K_PREFIX .. 'steps:' .. id) -- durable steps (lib/durable/steps.lua)
    purged = purged + 1
    out[#out + 1] = id
    out[#out + 1] = S_OK
  else
    out[#out + 1] = id
    out[#out + 1] = S_NOT_DEAD
  end
end
if purged > 0 then redis.pcall('HINCRBY', K_STATS, 'purged', purged) end
return out
