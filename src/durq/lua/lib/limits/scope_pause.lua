--- @include "lib/core/keys"
--- @include "lib/groups/offer"
--- @include "lib/limits/conf"
--- @include "lib/limits/rate_limit"
--- @include "lib/limits/queue_pause"

-- A task said "slow down" (durq.RateLimited): its scope pauses for `ms` from `now`, for
-- every worker. 'queue' pauses the whole queue (and, through the outbox, the other
-- shards of a sharded queue, whose prefixes are `others`: lib/limits/queue_pause.lua);
-- 'group' pauses group g: its limiter's TAT moves to now + ms (plus its burst tolerance)
-- unless it is later already, and a consumer is woken to park the group and plan the
-- wake-up (lib/limits/gate.lua). `f` is the flow settings (get_flow()). Used by
-- rate_limited.lua and settle.lua (a batch item given back by RateLimited).
local function scope_pause(f, scope, g, now, ms, others)
  if scope == 'queue' then
    queue_pause(f, now, now + ms)
    queue_pause_send(now, now + ms, ms, others) -- the other shards, if any
    return
  end
  local gk = K_PREFIX .. 'gtat'
  local tat = tonumber(redis.call('HGET', gk, g))
  redis.call('HSET', gk, g, tat_text(gcra_pause(tat, group_rate_of(g), now, ms)))
  if not f.parks then
    f.parks = true
    redis.call('HSET', K_PREFIX .. 'flow', 'parks', 1)
  end
  -- a consumer dequeues, parks the scope and plans the wake-up (the alarm)
  need_wake = true
end
