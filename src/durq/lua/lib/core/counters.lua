--- @include "lib/core/keys"

-- Counters are accumulated while a script runs and written once at the end, so a batch
-- costs one HINCRBY per counter. They are bookkeeping, written after the job changes are
-- complete and with pcall: a corrupted stats key cannot undo or block a job transition
-- (stats() then reports the corruption).
--- @per-call (reset at the start of every call: lua/functions.py)
local counts = {}
local ready_delta = {}
local ready_groups = {}
--- @end

local function count(field, n)
  counts[field] = (counts[field] or 0) + n
end

-- The ready gauge (K_STATS.ready) and the per-group backlog (K_GROUPS) move together.
local function ready_add(g, n)
  if ready_delta[g] == nil then
    ready_delta[g] = 0
    ready_groups[#ready_groups + 1] = g
  end
  ready_delta[g] = ready_delta[g] + n
end

local function flush_counters()
  local total = 0
  for i = 1, #ready_groups do
    local g = ready_groups[i]
    local n = ready_delta[g]
    total = total + n
    if g ~= '' and n ~= 0 then
      local s = tonumber(redis.pcall('ZINCRBY', K_GROUPS, n, g))
      if s and s <= 0 then redis.pcall('ZREM', K_GROUPS, g) end
    end
  end
  if total ~= 0 then redis.pcall('HINCRBY', K_STATS, 'ready', total) end
  for field, n in pairs(counts) do
    if n ~= 0 then redis.pcall('HINCRBY', K_STATS, field, n) end
  end
end
