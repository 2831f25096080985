--[[ groups: the largest named groups by ready jobs, or the groups named. Read only.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  limit, ARGV[2] offset (in the order of ready jobs; both ignored when names are
         given)
ARGV[3..] group names (optional)
Returns  {total_groups, group_1, ready_1, active_1, limit_1 or false, weight_1 or false, ...}
Errors   DURQ_WRONGTYPE when a durq key holds another Redis type
Cost     O(log(groups) + limit), or O(names).
]]
--- @include "lib/core/keys"
--- @include "lib/core/types"

local problem = keys_error({'groups', 'gactive', 'glimit', 'gweight'})
if problem then return wrongtype(problem) end

local names = {}
local ready = {}
if #ARGV > 2 then
  for i = 3, #ARGV do
    names[#names + 1] = ARGV[i]
    ready[#ready + 1] = redis.call('ZSCORE', K_GROUPS, ARGV[i]) or 0
  end
else
  local offset = tonumber(ARGV[2])
  local top = redis.call('ZREVRANGE', K_GROUPS, offset, offset + tonumber(ARGV[1]) - 1,
    'WITHSCORES')
  for i = 1, #top, 2 do
    names[#names + 1] = top[i]
    ready[#ready + 1] = top[i + 1]
  end
end
local out = {redis.call('ZCARD', K_GROUPS)}
for i = 1, #names do
  local g = names[i]
  out[#out + 1] = g
  out[#out + 1] = ready[i]
  out[#out + 1] = redis.call('HGET', K_GACTIVE, g) or 0
  out[#out + 1] = redis.call('HGET', K_GLIMIT, g)
  out[#out + 1] = redis.call('HGET', K_GWEIGHT, g)
end
return out
