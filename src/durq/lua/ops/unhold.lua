--[[ unhold: a capable worker brings held jobs (lib/holding/held.lua) back to the head of
their groups, then fetches in the same round trip (worker/holding.py): no consumer is
woken, so the jobs go to the worker that can run them, as far as the rotation allows
(one that another worker takes first is held again, without an attempt).
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  n: jobs to bring back at most (the worker's free slots)
ARGV[2..] the capabilities of the worker to bring back jobs of (in this order)
Returns  {brought, cap...}: how many jobs came back, then the capabilities given that
         still hold jobs
Errors   DURQ_WRONGTYPE when a durq key holds another Redis type (a group's keys
         included), before any change
Cost     O(n + capabilities) commands; n at most MAX_JOBS
]]
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/types"
--- @include "lib/core/make_ready"
--- @include "lib/holding/held"

local MAX_JOBS = 100

local want = math.min(tonumber(ARGV[1]), MAX_JOBS)
local caps = {}
for i = 2, #ARGV do caps[#caps + 1] = ARGV[i] end
local problem = held_types_error(caps)
  or keys_error({'jobs', 'rr', 'rrset', 'conf', 'stats', 'groups', 'wake'})
if problem then return wrongtype(problem) end
local out = {0}
-- taken in two passes: the ids and records first, checked (a group whose keys hold
-- another type stops the call before any change), then moved
local taken = {}
for i = 1, #caps do
  if want - #taken <= 0 then
    out[#out + 1] = caps[i]
  else
    local key = held_key(caps[i])
    local ids = redis.call('ZRANGE', key, 0, want - #taken - 1)
    for j = 1, #ids do
      local r = rec_decode(redis.call('HGET', K_JOBS, ids[j]))
      if r and r.state == ST_HELD then
        problem = problem or group_error(r.group)
      else
        held_left(r)
        r = nil -- cancelled or gone since it was held: its id only goes
      end
      taken[#taken + 1] = {key, ids[j], r}
    end
    if redis.call('ZCARD', key) > #ids then out[#out + 1] = caps[i] end
  end
end
if problem then return wrongtype(problem) end
local emptied = {}
for i = 1, #taken do
  local key, id, r = taken[i][1], taken[i][2], taken[i][3]
  redis.call('ZREM', key, id)
  emptied[key] = true
  if r then
    make_ready(id, r, true)
    count('held', -1)
    out[1] = out[1] + 1
  end
end
for i = 1, #caps do
  if emptied[held_key(caps[i])] then held_reindex(caps[i]) end
end
offer_touched()
flush_counters()
return out
