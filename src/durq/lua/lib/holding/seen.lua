--- @include "lib/core/keys"

-- When a worker of the queue last said it runs each capability (lib/holding/held.lua
-- describes the holding area):
--   caps  hash  capability -> when (ms, server time); it expires 2 x grace + 60 s after
--               the last call, as past twice the grace without one every entry reads as
--               unseen anyway (a queue no worker consumes any more leaves nothing behind)
local HELD_CAPS = 'caps'

-- A worker of the queue runs `caps` (a non-empty list) at `now`; `grace` in ms.
local function held_seen(caps, now, grace)
  local seen = {}
  for i = 1, #caps do
    seen[#seen + 1] = caps[i]
    seen[#seen + 1] = now
  end
  redis.call('HSET', K_PREFIX .. HELD_CAPS, unpack(seen))
  redis.call('PEXPIRE', K_PREFIX .. HELD_CAPS, 2 * grace + 60000)
end
