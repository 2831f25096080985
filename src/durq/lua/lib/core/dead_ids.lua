--- @include "lib/core/keys"

-- The dead letters a call on them (purge.lua, replay.lua) is asked for: ARGV[1] 'oldest'
-- (the oldest ARGV[2] of them) or 'ids' (ARGV[3..], dead letters or not).
local function asked_dead_ids()
  if ARGV[1] == 'oldest' then
    return redis.call('ZRANGE', K_DEAD, 0, tonumber(ARGV[2]) - 1)
  end
  local ids = {}
  for i = 3, #ARGV do ids[#ids + 1] = ARGV[i] end
  return ids
end
