--- @include "lib/core/keys"
--- @include "lib/core/outbox"
--- @include "lib/workflows/link"

-- A workflow step was dead-lettered (lib/core/dead_letter.lua kill): its workflow learns it through
-- the outbox, whatever its slot, since kill() runs in the middle of scripts that still
-- use the K_* keys; the workflow's home applies its failure policy (workflow_deliver.lua).
-- Under the "wait" policy the link stays, so that a replay of the step completes it; a
-- cancelled or expired step cannot be replayed (its workflow fails, or was cancelled):
-- its link goes.
local function fan_in_dead(id, r, now)
  local lk = K_PREFIX .. WF_LINKS
  local link = redis.call('HGET', lk, id)
  if not link then return end
  local home, wid, node, policy, run = wf_parse_link(link)
  if not home then return end
  if policy ~= 'wait' or r.state == ST_CANCELLED or r.state == ST_EXPIRED then
    redis.call('HDEL', lk, id)
  end
  local reason = redis.call('HGET', K_REASONS, id) or '{}'
  outbox_push(K_PREFIX, 'd:' .. id .. ':' .. r.deliveries,
    table.concat({'D', home, wid, node, reason, run}, '\0'), now)
end

-- The dead letter `id` is deleted for good: `why` 'purged' (purge.lua) or 'evicted'
-- (dead_cap, lib/core/dead_letter.lua); call it before its reason goes. A dead step still
-- linked is one its workflow waits for (policy "wait": every other death unlinked it).
-- It can no longer be replayed, so it died for good: its workflow learns it the way it
-- learned the death, through the outbox, with the reason
--   {"reason": why, "at": ms, "message": ..., "dead": <the reason it died with>}
-- and the home fails it (lib/workflows/fan_in.lua wf_died). Counted by membership: only the call
-- that found the link (and removes it) pushes, so a purge applied twice reports once. O(1).
local function fan_in_gone(id, why, now)
  local lk = K_PREFIX .. WF_LINKS
  local link = redis.call('HGET', lk, id)
  if not link then return end
  redis.call('HDEL', lk, id)
  local home, wid, node, _, run = wf_parse_link(link)
  if not home then return end
  local dead = redis.call('HGET', K_REASONS, id) or '{}'
  if string.sub(dead, 1, 1) ~= '{' then dead = cjson.encode(dead) end -- not durq's: a string
  local message = 'its dead letter was purged while the workflow waited for a replay'
  if why ~= 'purged' then
    message = 'its dead letter was evicted by dead_cap while the workflow waited for a replay'
  end
  local reason = '{"reason":"' .. why .. '","at":' .. string.format('%d', now) .. ',"message":"'
    .. message .. '","dead":' .. dead .. '}'
  outbox_push(K_PREFIX, 'g:' .. id, table.concat({'D', home, wid, node, reason, run}, '\0'),
    now)
end
