--- @include "lib/core/keys"
--- @include "lib/groups/room"

-- K_RR lists the groups that are eligible (ready jobs and a free slot); dequeue serves
-- them in turn. K_RRSET mirrors it so a group is listed at most once. A group that stops
-- being eligible stays listed until dequeue pops and drops it, so nothing here costs
-- more with the number of groups. Scripts touch() the groups whose jobs or slots they
-- changed and offer them once at the end; an offer wakes one idle consumer.
--- @per-call (reset at the start of every call: lua/functions.py)
local need_wake = false
local touched = {}
local touched_list = {}
--- @end

local function touch(g)
  if not touched[g] then
    touched[g] = true
    touched_list[#touched_list + 1] = g
  end
end

local function group_offer(g)
  if redis.call('SISMEMBER', K_RRSET, g) == 0 and group_room(g, 1) > 0 then
    redis.call('RPUSH', K_RR, g)
    redis.call('SADD', K_RRSET, g)
    need_wake = true
  end
end

local function offer_touched()
  for i = 1, #touched_list do group_offer(touched_list[i]) end
end

local function wake_if_needed()
  if need_wake then redis.pcall('ZADD', K_WAKE, 0, '0') end
end
