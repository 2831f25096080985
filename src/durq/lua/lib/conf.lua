--- @include "lib/keys"
--- @include "lib/conf_defaults"

-- Queue settings shared by every client, stored in K_CONF and written by configure.lua,
-- read at most once per call (their defaults and meaning: lib/conf_defaults.lua).
--- @per-call (reset at the start of every call: lua/functions.py)
local conf_cache = nil
--- @end

local function get_conf()
  if conf_cache == nil then
    local raw = redis.call('HMGET', K_CONF, 'group_limit', 'dedup_window', 'dead_cap')
    conf_cache = {
      group_limit = tonumber(raw[1]) or DEFAULT_GROUP_LIMIT,
      dedup_window = tonumber(raw[2]) or DEFAULT_DEDUP_WINDOW,
      dead_cap = tonumber(raw[3]) or DEFAULT_DEAD_CAP,
    }
  end
  return conf_cache
end
