--- @include "lib/core/keys"

-- Until when a worker of the queue has said it runs each capability (lib/holding/held.lua
-- describes the holding area):
--   caps  hash  capability -> until when (ms, server time) the last saying covers: its
--               time plus how long its worker promised to say it again within (its next
--               look and a margin: worker/upkeep.py); a saying never moves an entry back
--               (another worker's promise may reach further). It expires 2 x grace +
--               AHEAD_MAX + 60 s after the last saying, past the furthest promise, as past
--               twice the grace beyond one every entry reads as unseen anyway (a queue no
--               worker consumes any more leaves nothing behind)
local HELD_CAPS = 'caps'

-- A worker of the queue runs `caps` (a non-empty list) at `now`, and says it again
-- within `ahead` ms (at most AHEAD_MAX: every saying sets the same TTL); `grace` in ms.
-- Three commands (HMGET, HSET, PEXPIRE).
local function held_seen(caps, now, grace, ahead)
  local AHEAD_MAX = 3600000
  local key = K_PREFIX .. HELD_CAPS
  local til = now + math.min(math.max(ahead, 0), AHEAD_MAX)
  local stored = redis.call('HMGET', key, unpack(caps))
  local seen = {}
  for i = 1, #caps do
    if (tonumber(stored[i]) or 0) < til then
      seen[#seen + 1] = caps[i]
      seen[#seen + 1] = til
    end
  end
  if #seen > 0 then redis.call('HSET', key, unpack(seen)) end
  redis.call('PEXPIRE', key, 2 * grace + AHEAD_MAX + 60000)
end
