--[[ scaling: what an autoscaler needs of one queue (worker/health.py, /scale.json): jobs
ready, leased (active), held (waiting for a capable worker), delayed and due, and the
enqueue time of the oldest ready job, sampled from the heads of the default group and of
the SAMPLE largest named groups (a job deeper in a group is younger than its head, but a
group outside the sample may hold an older one: the age is a lower bound).
KEYS     the queue key vector (lib/core/keys.lua)
ARGV     none
Returns  {ready, active, held, delayed, due, oldest_enqueued_ms (0: none ready), now}
Errors   DURQ_WRONGTYPE when a durq key holds another Redis type
Cost     O(SAMPLE) commands, read only.
]]
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/types"
--- @include "lib/core/record_peek"

local SAMPLE = 16

local problem = keys_error({'stats', 'active', 'delayed', 'groups', 'jobs'})
if problem then return wrongtype(problem) end
local now = now_ms()
local sizes = redis.call('HMGET', K_STATS, 'ready', 'held')
local oldest = 0
local function head(g)
  if group_error(g) then return end -- not ours to read: left out of the sample
  local ids = {}
  local first = redis.call('LINDEX', ready_list(g), 0)
  if first then ids[1] = first end
  local top = redis.call('ZRANGE', ready_prio(g), 0, 0)
  if top[1] then ids[#ids + 1] = top[1] end
  for i = 1, #ids do
    local _, state, _, _, _, _, _, _, enq = rec_peek(redis.call('HGET', K_JOBS, ids[i]))
    if state == ST_PENDING and (oldest == 0 or enq < oldest) then oldest = enq end
  end
end
head('')
local groups = redis.call('ZREVRANGE', K_GROUPS, 0, SAMPLE - 1)
for i = 1, #groups do head(groups[i]) end
return {
  math.max(tonumber(sizes[1]) or 0, 0), redis.call('ZCARD', K_ACTIVE),
  math.max(tonumber(sizes[2]) or 0, 0), redis.call('ZCARD', K_DELAYED),
  redis.call('ZCOUNT', K_DELAYED, '-inf', now), oldest, now,
}
