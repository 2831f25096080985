-- Server time in milliseconds. Leases, delays and retention all use the Redis server's
-- clock, never a client's, so client clock skew cannot expire or extend a lease.
-- replicate_commands() makes Redis 6.2 replicate the effects of scripts that read TIME;
-- it is the default (and a no-op) on Redis 7 and Valkey, whose Functions may not even
-- name it: a library leaves the block out (lua/functions.py).
--- @eval-only
if redis.replicate_commands then redis.replicate_commands() end
--- @end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A job's delay argument in ms: a number of ms from now, or '@' and the epoch ms it is
-- due at (an eta), measured against this server's clock, so that a producer whose
-- clock is skewed still delays by the right amount; a time past is due now.
local function delay_of(arg, now)
  if string.byte(arg, 1) == 64 then -- '@'
    local left = tonumber(string.sub(arg, 2)) - now
    if left > 0 then return left end
    return 0
  end
  return tonumber(arg)
end
