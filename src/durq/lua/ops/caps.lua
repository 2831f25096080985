--[[ caps: a worker of the queue says which capabilities it has (the tasks it runs, at
each version it can run: lib/holding/held.lua), at its start and with each look that finds
held jobs (worker/upkeep.py); learns which of them have held jobs waiting (it then brings
them back, unhold.lua); and dead-letters jobs held for a capability that no worker of the
queue has had for the grace. While none is held, caps_seen.lua says the same for less.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  grace_ms: unknown_task_grace (> 0)
ARGV[2]  ahead_ms: the worker says them again within this (lib/holding/seen.lua)
ARGV[3..] the worker's capabilities
Returns  {dead, cap...}: how many held jobs this call dead-lettered (reason
         unknown_task), then the worker's capabilities that have held jobs
Errors   DURQ_WRONGTYPE when a durq key holds another Redis type, before any change
Cost     O(capabilities) commands, plus the sweep: at most SWEEP_CAPS capabilities
         looked at and SWEEP_JOBS jobs dead-lettered per call (the rest at the next
         heartbeat of any worker of the queue).
]]
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/types"
--- @include "lib/holding/held"

local SWEEP_CAPS = 20
local SWEEP_JOBS = 100

local grace = tonumber(ARGV[1])
local caps = {}
for i = 3, #ARGV do caps[#caps + 1] = ARGV[i] end
local problem = held_types_error({})
  or keys_error({'jobs', 'active', 'dead', 'conf', 'gactive', 'reasons', 'ctl', 'progress'})
if problem then return wrongtype(problem) end
local now = now_ms()
local index = K_PREFIX .. HELD_INDEX
local out = {0}
if #caps > 0 then
  held_seen(caps, now, grace, tonumber(ARGV[2]))
  local waiting = redis.call('ZMSCORE', index, unpack(caps))
  for i = 1, #caps do
    if waiting[i] then out[#out + 1] = caps[i] end
  end
end
-- the sweep: capabilities whose oldest job was held for the grace, and that no worker
-- of the queue has said it has for as long past the time its last saying covered
local due = redis.call('ZRANGEBYSCORE', index, '-inf', now - grace, 'LIMIT', 0, SWEEP_CAPS)
local left = SWEEP_JOBS
for i = 1, #due do
  local cap = due[i]
  local key = held_key(cap)
  local seen = tonumber(redis.call('HGET', K_PREFIX .. HELD_CAPS, cap))
  if left > 0 and (not seen or seen <= now - grace) and type_error(key, 'zset') == nil then
    local ids = redis.call('ZRANGEBYSCORE', key, '-inf', now - grace, 'WITHSCORES', 'LIMIT', 0,
      left)
    for j = 1, #ids, 2 do
      local id = ids[j]
      redis.call('ZREM', key, id)
      local r = rec_decode(redis.call('HGET', K_JOBS, id))
      if r and r.state == ST_HELD then -- else: cancelled or gone since
        held_bury(id, r, cap, now, grace, tonumber(ids[j + 1]))
        count('held', -1)
        out[1] = out[1] + 1
      else
        held_left(r)
      end
      left = left - 1
    end
    held_reindex(cap)
  end
end
offer_touched()
flush_counters()
return out
