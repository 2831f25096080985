--- @include "lib/core/keys"
--- @include "lib/core/type_check"
--- @include "lib/limits/rate_limit"

-- Flow control (docs/flow-control.md) keeps its keys under the queue prefix, outside
-- the key vector, as the per-group keys are: they share the queue's slot.
--   <prefix>flow   hash    settings: rate, group_rate (specs, lib/limits/rate_limit.lua),
--                          max_active; markers: groups (how many groups have a rate of
--                          their own), parks (groups may be parked or paused; 'release':
--                          every limit was removed, bring them all back); the queue
--                          limiter's TAT (tat) and its starts per second (sec, cur, prev)
--   <prefix>grate  hash    group -> its own rate spec (overrides group_rate)
--   <prefix>gtat   hash    group -> the TAT of its limiter (ms)
--   <prefix>park   zset    group -> when it may start again (ms); out of K_RR till then
--   <prefix>alarm  string  '<ms>|<consumer>': the one idle consumer due to wake then
-- The settings' defaults; durq.protocol.limits.FLOW_DEFAULTS holds the same
-- (tests/lua/test_limits_agreement.py keeps both equal).
local FLOW_DEFAULT_RATE = ''          -- no rate for the whole queue
local FLOW_DEFAULT_GROUP_RATE = ''    -- no rate for each named group
local FLOW_DEFAULT_MAX_ACTIVE = 0     -- 0: no cap on leased jobs

local FLOW_KEY_TYPES = {flow = 'hash', grate = 'hash', gtat = 'hash', park = 'zset',
  alarm = 'string'}

--- @per-call (reset at the start of every call: lua/functions.py)
local flow_cache = nil
--- @end

local function flow_read(raw)
  local f = {
    rate = raw[1] or FLOW_DEFAULT_RATE,
    group_rate = raw[2] or FLOW_DEFAULT_GROUP_RATE,
    max_active = tonumber(raw[3]) or FLOW_DEFAULT_MAX_ACTIVE,
    groups = tonumber(raw[4]) or 0,
    parks = raw[5] and true or false,
    release = raw[5] == 'release',
    tat = tonumber(raw[6]),
    sec = tonumber(raw[7]) or 0,
    cur = tonumber(raw[8]) or 0,
    prev = tonumber(raw[9]) or 0,
  }
  f.qrate = rate_of(f.rate)
  f.grate = rate_of(f.group_rate)
  -- groups need a look at each turn: a default rate, rates of their own, or pauses
  f.per_group = f.grate ~= nil or f.groups > 0 or f.parks
  f.on = f.per_group or f.qrate ~= nil or f.max_active > 0 or f.tat ~= nil
  return f
end

-- Read the flow settings (one HMGET; a queue without flow control pays nothing more),
-- and check the types of the other flow keys when they may be used (or `all`): the
-- problem, or nil (see lib/core/type_check.lua).
local function flow_error(all)
  local fk = K_PREFIX .. 'flow'
  local raw = redis.pcall('HMGET', fk, 'rate', 'group_rate', 'max_active', 'groups', 'parks',
    'tat', 'sec', 'cur', 'prev')
  if raw.err then return type_error(fk, 'hash') end
  flow_cache = flow_read(raw)
  if not (all or flow_cache.on) then return nil end
  for _, part in ipairs({'grate', 'gtat', 'park', 'alarm'}) do
    local err = type_error(K_PREFIX .. part, FLOW_KEY_TYPES[part])
    if err then return err end
  end
  return nil
end

local function get_flow()
  if flow_cache == nil then
    local err = flow_error(false)
    if err then error('DURQ_WRONGTYPE ' .. err) end
  end
  return flow_cache
end

-- The rate of group g (its own, else the default for named groups), or nil.
local function group_rate_of(g)
  if g == '' then return nil end
  local f = get_flow()
  if f.groups > 0 then
    local own = redis.call('HGET', K_PREFIX .. 'grate', g)
    if own then return rate_of(own) end
  end
  return f.grate
end
