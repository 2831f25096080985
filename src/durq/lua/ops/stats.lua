--[[ stats: a consistent snapshot of the queue's counters and sizes. Read only.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV     none
Returns  {field_1, value_1, ...}: the K_STATS counters (enqueued, completed, failed,
         retried, dead_lettered, reclaimed, deferred, superseded, deduplicated, replayed, purged,
         dead_evicted, corrupt, cancelled, expired, ticks_fired, ticks_skipped, ticks_missed,
         ready and held (gauges: jobs ready, jobs in the holding area, lib/holding/held.lua);
         also rate_limited and the workflow counters wf_*) followed by active, delayed,
         dead, retained, groups (named groups with ready jobs), rotation (eligible groups),
         now (ms).
Errors   DURQ_WRONGTYPE when a durq key holds another Redis type
Cost     O(1): counters are kept by the scripts that change them.
]]
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/types"

local problem = keys_error({'stats', 'active', 'delayed', 'dead', 'done', 'groups', 'rr'})
if problem then return wrongtype(problem) end

local out = redis.call('HGETALL', K_STATS)
local function add(name, value)
  out[#out + 1] = name
  out[#out + 1] = value
end
add('active', redis.call('ZCARD', K_ACTIVE))
add('delayed', redis.call('ZCARD', K_DELAYED))
add('dead', redis.call('ZCARD', K_DEAD))
add('retained', redis.call('ZCARD', K_DONE))
add('groups', redis.call('ZCARD', K_GROUPS))
add('rotation', redis.call('LLEN', K_RR))
add('now', now_ms())
return out
