--- @include "lib/core/keys"
--- @include "lib/groups/keys"
--- @include "lib/core/clock"

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
    -- the sequence lives with the settings, not with the counters: counters may be
    -- reset (deleted), and a sequence that starts again would let new jobs overtake
    -- older ones of their priority (dequeue also reads it: see group_settings)
    if not head then
      seq = redis.call('HINCRBY', K_CONF, 'seq', 1)
      if seq == 1 then
        -- a new sequence (the queue's first prioritized job, or the field was lost):
        -- it starts at the server time, above any number an older job can hold
        seq = now_ms()
        redis.call('HSET', K_CONF, 'seq', seq)
      end
    end
    redis.call('ZADD', ready_prio(g), -prio * PRIO_SHIFT + seq, id)
  end
end
