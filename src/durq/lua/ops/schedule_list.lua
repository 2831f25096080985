--[[ schedule_list: the periodic schedules of a queue and their state. Read only.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  mode: 'page' (ARGV[2] offset, ARGV[3] limit: in name order), 'names' (ARGV[2..]
         the names), or 'refill' (ARGV[2] limit: cron schedules that want more ticks)
Returns  {now, total, then per schedule found: name, due or false, stored ticks,
         state of its last job (0: gone, else the record state), then the values of
         LIST_FIELDS in order (false when unset)}; total counts every schedule.
Errors   DURQ_WRONGTYPE when a schedule key holds another Redis type.
Cost     O(log(schedules) + limit) commands.
]]
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/type_check"
--- @include "lib/schedules/keys"

-- mirrored by durq.protocol.schedules.LIST_FIELDS
local LIST_FIELDS = {'spec', 'ver', 'kind', 'every', 'anchor', 'ends', 'wm', 'horizon',
  'catch', 'cap', 'grace', 'overlap', 'paused', 'ended', 'decl', 'origin', 'task', 'info',
  'current', 'last_tick', 'last_at', 'fired', 'skipped', 'missed', 'created', 'updated'}

local problem = type_error(K_SCHED, 'zset') or type_error(K_SNAMES, 'zset')
  or type_error(K_SREFILL, 'zset')
if problem then return wrongtype(problem) end
local now = now_ms()
local mode = ARGV[1]
local names
if mode == 'page' then
  local offset = tonumber(ARGV[2])
  names = redis.call('ZRANGE', K_SNAMES, offset, offset + tonumber(ARGV[3]) - 1)
elseif mode == 'refill' then
  names = redis.call('ZRANGEBYSCORE', K_SREFILL, '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
else
  names = {unpack(ARGV, 2)}
end
local out = {now, redis.call('ZCARD', K_SNAMES)}
for i = 1, #names do
  local key = sch_key(names[i])
  local t = redis.call('TYPE', key)['ok']
  if t ~= 'none' and t ~= 'hash' then return wrongtype(type_error(key, 'hash')) end
  if t == 'hash' then
    local values = redis.call('HMGET', key, unpack(LIST_FIELDS))
    local current = values[19]
    local state = 0
    if current then
      local r = rec_decode(redis.call('HGET', K_JOBS, current))
      if r then state = r.state end
    end
    out[#out + 1] = names[i]
    out[#out + 1] = redis.call('ZSCORE', K_SCHED, names[i]) or false
    local n = redis.pcall('ZCARD', sch_ticks(names[i]))
    out[#out + 1] = type(n) == 'number' and n or -1
    out[#out + 1] = state
    for j = 1, #values do out[#out + 1] = values[j] or false end
  end
end
return out
