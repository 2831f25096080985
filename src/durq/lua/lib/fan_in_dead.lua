--- @include "lib/keys"
--- @include "lib/outbox"
--- @include "lib/wf_link"

-- A workflow step was dead-lettered (lib/dead_letter.lua kill): its workflow learns it through
-- the outbox, whatever its slot, since kill() runs in the middle of scripts that still
-- use the K_* keys; the workflow's home applies its failure policy (workflow_deliver.lua).
-- Under the "wait" policy the link stays, so that a replay of the step completes it; a
-- cancelled or expired step cannot be replayed (its workflow fails, or was cancelled):
-- its link goes.
local function fan_in_dead(id, r, now)
  local lk = K_PREFIX .. WF_LINKS
  local link = redis.call('HGET', lk, id)
  if not link then return end
  local home, wid, node, policy = wf_parse_link(link)
  if not home then return end
  if policy ~= 'wait' or r.state == ST_CANCELLED or r.state == ST_EXPIRED then
    redis.call('HDEL', lk, id)
  end
  local reason = redis.call('HGET', K_REASONS, id) or '{}'
  outbox_push(K_PREFIX, 'd:' .. id .. ':' .. r.deliveries,
    table.concat({'D', home, wid, node, reason}, '\0'), now)
end
