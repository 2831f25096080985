--- @include "lib/groups/keys"

local function append_all(dst, src)
  for i = 1, #src do dst[#dst + 1] = src[i] end
end

-- Take up to `want` ids from group g: higher priorities, then the default list, then
-- lower priorities. The second result is true when the list holds another type, the
-- third how many of the ids came from the priority zset (the caller compares it with
-- the zset's size to know whether prioritized jobs are left).
local function group_pop(g, want)
  local out = {}
  local pk = ready_prio(g)
  local hi = redis.call('ZRANGEBYSCORE', pk, '-inf', '(0', 'LIMIT', 0, want)
  local scored = #hi
  if #hi > 0 then
    redis.call('ZREM', pk, unpack(hi))
    append_all(out, hi)
  end
  local garbage = false
  if #out < want then
    -- pcall: ids were popped above, and a list holding another type (garbage written
    -- by something else) must not fail the script after that; it is skipped instead
    local lo = redis.pcall('LPOP', ready_list(g), want - #out)
    if type(lo) == 'table' and lo.err then
      garbage = true
    elseif lo then
      append_all(out, lo)
    end
  end
  if #out < want then
    local rest = redis.call('ZRANGEBYSCORE', pk, '0', '+inf', 'LIMIT', 0, want - #out)
    if #rest > 0 then
      redis.call('ZREM', pk, unpack(rest))
      append_all(out, rest)
      scored = scored + #rest
    end
  end
  return out, garbage, scored
end
