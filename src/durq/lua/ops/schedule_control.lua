--[[ schedule_control: pause, resume, remove or trigger a periodic schedule.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  action: 'pause', 'resume', 'remove' or 'trigger'
ARGV[2]  name
Returns  false when there is no such schedule; else
           pause, remove  1
           resume         the next due time (ms), or false if the schedule has ended
           trigger        the id of the job enqueued now (sched:<name>@<now>:run); it
                          runs besides the ticks and does not move the watermark
         Resuming skips the ticks that fell in the pause (the watermark moves to now).
Errors   DURQ_ARG for an unknown action; DURQ_WRONGTYPE when a key the call would use
         holds another Redis type; both before any change.
Cost     O(1) commands (remove: O(stored ticks) for a cron schedule).
]]
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/types"
--- @include "lib/groups/offer"
--- @include "lib/schedules/fire"

local action, name = ARGV[1], ARGV[2]
local actions = {pause = true, resume = true, remove = true, trigger = true}
if not actions[action] then
  return redis.error_reply('DURQ_ARG unknown schedule action ' .. action)
end
local key, tk = sch_key(name), sch_ticks(name)
local problem = type_error(key, 'hash') or type_error(tk, 'zset')
  or type_error(K_SCHED, 'zset') or type_error(K_SNAMES, 'zset')
  or type_error(K_SREFILL, 'zset')
if not problem and action == 'trigger' then
  problem = keys_error({'jobs', 'done', 'rr', 'rrset', 'wake'})
    or type_error(ready_list(''), 'list')
end
if problem then return wrongtype(problem) end
local s = sch_read(name)
if not s then return false end
local now = now_ms()

if action == 'remove' then
  redis.call('DEL', key, tk)
  redis.call('ZREM', K_SCHED, name)
  redis.call('ZREM', K_SNAMES, name)
  redis.call('ZREM', K_SREFILL, name)
  return 1
elseif action == 'pause' then
  redis.call('HSET', key, 'paused', '1', 'updated', now)
  redis.call('ZREM', K_SCHED, name)
  return 1
elseif action == 'resume' then
  s.paused = false
  s.wm = math.max(s.wm, now)
  redis.call('HSET', key, 'paused', '0', 'wm', ms(s.wm), 'updated', now)
  redis.call('ZREMRANGEBYSCORE', tk, '-inf', s.wm)
  local due = sch_plan(s)
  if due then redis.call('ZADD', K_WAKE, 0, '0') end
  return due or false
end
local id = sch_fire(s, now, now, ':run')
offer_touched()
flush_counters()
wake_if_needed()
return id
