--- @include "lib/core/keys"
--- @include "lib/core/conf_defaults"

-- Queue settings shared by every client, stored in K_CONF and written by configure.lua,
-- read at most once per call (their defaults and meaning: lib/core/conf_defaults.lua).
--- @per-call (reset at the start of every call: lua/functions.py)
local conf_cache = nil
--- @end

local function conf_of(raw)
  conf_cache = {
    group_limit = tonumber(raw[1]) or DEFAULT_GROUP_LIMIT,
    dedup_window = tonumber(raw[2]) or DEFAULT_DEDUP_WINDOW,
    dead_cap = tonumber(raw[3]) or DEFAULT_DEAD_CAP,
  }
  return conf_cache
end

local function get_conf()
  if conf_cache == nil then
    return conf_of(redis.call('HMGET', K_CONF, 'group_limit', 'dedup_window', 'dead_cap'))
  end
  return conf_cache
end

-- get_conf, and the value of one more field of K_CONF (false: none) read by the same
-- HMGET when the settings were not read yet in this call: one command fewer.
local function get_conf_and(field)
  if conf_cache ~= nil then return conf_cache, redis.call('HGET', K_CONF, field) end
  local raw = redis.call('HMGET', K_CONF, 'group_limit', 'dedup_window', 'dead_cap', field)
  return conf_of(raw), raw[4]
end
