--- @include "lib/core/keys"
--- @include "lib/limits/conf"
--- @include "lib/limits/park"
--- @include "lib/groups/offer"

-- configure.lua's flow-control scopes:
--   'flow'   name rate or group_rate (value: a spec, lib/limits/rate_limit.lua), or max_active
--   'grate'  name a group, value its own rate spec
local FLOW_SETTINGS = {rate = 'spec', group_rate = 'spec', max_active = 'count'}

-- The error reply for a bad flow setting or a flow key of another type, or nil.
local function flow_settings_error(args)
  local any = false
  for i = 1, #args, 3 do
    local scope, name, value = args[i], args[i + 1], args[i + 2]
    if scope == 'flow' or scope == 'grate' then
      any = true
      local kind = 'spec'
      if scope == 'flow' then kind = FLOW_SETTINGS[name] end
      if not kind then
        return redis.error_reply('DURQ_ARG unknown flow setting ' .. name)
      end
      if kind == 'spec' and not rate_spec_ok(value) then
        return redis.error_reply('DURQ_ARG bad rate spec ' .. value)
      end
      if kind == 'count' and value ~= '' and not string.match(value, '^%d+$') then
        return redis.error_reply('DURQ_ARG ' .. name .. ' must be an int >= 0')
      end
    end
  end
  if not any then return nil end
  local problem = flow_error(true)
  if problem then return wrongtype(problem) end
  return nil
end

-- After the settings were written: dequeue learns whether groups have rates of their
-- own; a group whose rate changed is looked at again now; one idle consumer is woken
-- to plan again, the alarm held for the old limits being void.
local function flow_settings_applied(args)
  local changed = false
  for i = 1, #args, 3 do
    if args[i] == 'grate' then
      unpark(args[i + 1])
      changed = true
    elseif args[i] == 'flow' then
      changed = true
    end
  end
  if not changed then return end
  local n = redis.call('HLEN', K_PREFIX .. 'grate')
  if n > 0 then
    redis.call('HSET', K_PREFIX .. 'flow', 'groups', n)
  else
    redis.call('HDEL', K_PREFIX .. 'flow', 'groups')
  end
  local left = redis.call('HMGET', K_PREFIX .. 'flow', 'rate', 'group_rate', 'max_active',
    'parks')
  if n == 0 and not left[1] and not left[2] and not left[3] then
    unpark_all()
  elseif left[4] == 'release' then -- a limit again: the groups still parked stay so
    redis.call('HSET', K_PREFIX .. 'flow', 'parks', 1)
  end
  redis.call('DEL', K_PREFIX .. 'alarm')
  need_wake = true
end
