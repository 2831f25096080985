--- @include "lib/group_keys"

local function append_all(dst, src)
  for i = 1, #src do dst[#dst + 1] = src[i] end
end

-- Take up to `want` ids from group g: higher priorities, then the default list, then
-- lower priorities.
local function group_pop(g, want)
  local out = {}
  local pk = ready_prio(g)
  local hi = redis.call('ZRANGEBYSCORE', pk, '-inf', '(0', 'LIMIT', 0, want)
  if #hi > 0 then
    redis.call('ZREM', pk, unpack(hi))
    append_all(out, hi)
  end
  if #out < want then
    local lo = redis.call('LPOP', ready_list(g), want - #out)
    if lo then append_all(out, lo) end
  end
  if #out < want then
    local rest = redis.call('ZRANGEBYSCORE', pk, '0', '+inf', 'LIMIT', 0, want - #out)
    if #rest > 0 then
      redis.call('ZREM', pk, unpack(rest))
      append_all(out, rest)
    end
  end
  return out
end
