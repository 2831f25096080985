-- Queue settings shared by every client, stored in K_CONF and written by configure.lua,
-- read at most once per call. Defaults must match durq.protocol.admin.CONF_DEFAULTS.
--   group_limit   default concurrency per named group; 0 means unlimited
--   dedup_window  ms after enqueue during which a finished job's id stays taken
--   dead_cap      max dead letters kept; 0 means unlimited; evictions are counted
local conf_cache = nil

local function get_conf()
  if conf_cache == nil then
    local raw = redis.call('HMGET', K_CONF, 'group_limit', 'dedup_window', 'dead_cap')
    conf_cache = {
      group_limit = tonumber(raw[1]) or 0,
      dedup_window = tonumber(raw[2]) or 60000,
      dead_cap = tonumber(raw[3]) or 0,
    }
  end
  return conf_cache
end
