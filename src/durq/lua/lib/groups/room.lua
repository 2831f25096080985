--- @include "lib/core/keys"
--- @include "lib/core/conf"
--- @include "lib/groups/keys"

-- How many more jobs group g may start now: 0 when it has none ready or no free slot.
-- (A group whose keys hold another type counts as having none ready.)
local function group_room(g, want)
  local l = redis.pcall('LLEN', ready_list(g))
  local p = redis.pcall('ZCARD', ready_prio(g))
  if type(l) ~= 'number' or type(p) ~= 'number' or l + p == 0 then return 0 end
  if g == '' then return want end
  local lim = tonumber(redis.call('HGET', K_GLIMIT, g)) or get_conf().group_limit
  if lim > 0 then
    local free = lim - (tonumber(redis.call('HGET', K_GACTIVE, g)) or 0)
    if free < want then want = free end
  end
  if want < 0 then return 0 end
  return want
end
