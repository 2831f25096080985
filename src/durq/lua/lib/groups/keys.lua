--- @include "lib/core/keys"

-- Ready jobs live per group; the default group '' holds ungrouped jobs. A group has a
-- list of default-priority ids (FIFO) and a zset of ids with another priority, scored
-- -priority * 2^44 + seq, so higher priorities come first and FIFO holds within one.
local PRIO_SHIFT = 17592186044416 -- 2^44

local function ready_list(g)
  if g == '' then return K_PREFIX .. 'pending' end
  return K_PREFIX .. 'g:' .. g
end

local function ready_prio(g)
  if g == '' then return K_PREFIX .. 'prio' end
  return K_PREFIX .. 'gp:' .. g
end
