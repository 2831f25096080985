--[[ configure: change settings shared by every client of the queue.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV     triples (scope, name, value):
           scope 'queue': name is group_limit, dedup_window or dead_cap
           scope 'limit': name is a group, value its concurrency limit
           scope 'weight': name is a group, value the jobs it is served per turn
           scope 'flow': name is rate, group_rate (value: a rate spec 'limit:per_ms:burst')
             or max_active (flow control, lib/limits/settings.lua)
           scope 'grate': name is a group, value its own rate spec
         value '' removes the setting (back to the default).
Returns  OK
Effects  a group whose limit was raised is offered to the rotation at once; a change of
         flow control wakes one idle consumer to plan again.
Errors   DURQ_ARG for an unknown scope or flow setting, DURQ_WRONGTYPE when a durq key holds another
         Redis type; both before any change
Cost     O(number of settings).
]]
--- @include "lib/core/keys"
--- @include "lib/groups/offer"
--- @include "lib/core/types"
--- @include "lib/limits/settings"

local hashes = {queue = K_CONF, limit = K_GLIMIT, weight = K_GWEIGHT,
  flow = K_PREFIX .. 'flow', grate = K_PREFIX .. 'grate'}
for i = 1, #ARGV, 3 do
  if not hashes[ARGV[i]] then
    return redis.error_reply('DURQ_ARG unknown setting scope ' .. ARGV[i])
  end
end
local problem = keys_error({'conf', 'glimit', 'gweight', 'gactive', 'groups', 'rr', 'rrset'})
if problem then return wrongtype(problem) end
local flow_problem = flow_settings_error(ARGV)
if flow_problem then return flow_problem end
for i = 1, #ARGV, 3 do
  local h = hashes[ARGV[i]]
  if ARGV[i + 2] == '' then
    redis.call('HDEL', h, ARGV[i + 1])
  else
    redis.call('HSET', h, ARGV[i + 1], ARGV[i + 2])
  end
end
for i = 1, #ARGV, 3 do
  if ARGV[i] == 'limit' then group_offer(ARGV[i + 1]) end
  if ARGV[i] == 'queue' and ARGV[i + 1] == 'group_limit' then
    -- a new default can unblock any group; they are found as their slots free up, but
    -- the groups listed by backlog are offered now so an idle queue starts at once
    local top = redis.call('ZREVRANGE', K_GROUPS, 0, 999)
    for j = 1, #top do group_offer(top[j]) end
  end
end
flow_settings_applied(ARGV)
wake_if_needed()
return 'OK'
