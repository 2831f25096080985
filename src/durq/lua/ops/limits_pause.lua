--[[ limits_pause: apply the pause of a sharded queue in one of its shards: an outbox entry
'P' that rate_limited.lua wrote in another shard (durq.RateLimited with scope 'queue'),
delivered at least once by that shard's workers (durq.worker.outbox). Idempotent: the
queue limiter's TAT only moves later, so an entry applied again changes nothing, however
late.
KEYS     the shard's key vector (lib/core/keys.lua)
ARGV[1]  the entry: 'P', the shard's prefix, the end of the pause (ms, server time of the
         sending shard's node), NUL-separated
Returns  'OK'
Effects  unless the pause has ended already: the queue limiter's TAT (lib/limits/rate_limit.lua)
         moves to the end (plus its burst tolerance) unless it is later already, and the
         shard notes the end as known to its siblings (lib/limits/queue_pause.lua: it sends no
         pause of its own ending about as late); one idle consumer is woken to plan the
         wait.
Errors   DURQ_ARG for an entry of another kind or for another slot; DURQ_WRONGTYPE when a
         flow key holds another Redis type, before any change
Cost     O(1) commands.
]]
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/types"
--- @include "lib/limits/queue_pause"

local kind, prefix, till = string.match(ARGV[1], '^(%a)%z([^%z]*)%z(%d+)$')
if kind ~= 'P' then
  return redis.error_reply('DURQ_ARG not a pause entry')
end
if prefix ~= K_PREFIX then
  return redis.error_reply('DURQ_ARG the entry is for ' .. prefix .. ', not ' .. K_PREFIX)
end
local problem = flow_error(true) or keys_error({'wake'})
if problem then return wrongtype(problem) end
local now = now_ms()
till = tonumber(till)
if till > now then
  queue_pause(get_flow(), now, till)
  queue_pause_note(till)
end
wake_if_needed()
return 'OK'
