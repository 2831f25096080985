--- @include "lib/group_keys"

-- Add a ready id to group g: at the head (a returning job) or the tail.
local function group_push(g, id, prio, head)
  if prio == 0 then
    if head then
      redis.call('LPUSH', ready_list(g), id)
    else
      redis.call('RPUSH', ready_list(g), id)
    end
  else
    -- a returning job takes seq 0: the head of its priority level
    local seq = 0
    if not head then seq = redis.call('HINCRBY', K_STATS, 'seq', 1) end
    redis.call('ZADD', ready_prio(g), -prio * PRIO_SHIFT + seq, id)
  end
end
