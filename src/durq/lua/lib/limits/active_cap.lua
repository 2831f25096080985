--- @include "lib/core/keys"
--- @include "lib/groups/offer"

-- A job that leaves K_ACTIVE frees a place under the queue's max_active (flow control):
-- an idle consumer may be waiting for one, so one is woken. Queues without a max_active
-- pay one HGET. pcall: a damaged flow key must not fail a script after its changes.
local function cap_freed()
  local cap = redis.pcall('HGET', K_PREFIX .. 'flow', 'max_active')
  if type(cap) == 'string' and (tonumber(cap) or 0) > 0 then need_wake = true end
end
