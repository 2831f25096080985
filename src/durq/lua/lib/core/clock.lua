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
