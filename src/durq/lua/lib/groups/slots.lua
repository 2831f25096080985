--- @include "lib/core/keys"
--- @include "lib/core/record"
--- @include "lib/groups/offer"

-- A named group's slots (while limits are configured): its active jobs and its returning
-- delayed jobs hold one each.
local function slot_add(g, n)
  if g == '' then return end
  local a = redis.call('HINCRBY', K_GACTIVE, g, n)
  if a <= 0 then redis.call('HDEL', K_GACTIVE, g) end
end

-- Give back the slot a job holds, if it holds one (before it becomes ready or dies).
local function drop_slot(r)
  if rec_has_slot(r) then
    slot_add(r.group, -1)
    r.flags = r.flags - FLAG_SLOT
    touch(r.group)
  end
end
