--[[ schedule_refill: store more upcoming ticks of a cron schedule.
Cron times are computed in Python (cronsim, zoneinfo), never in Lua: a cron schedule keeps
its next ticks in <p>sticks:<name> and asks for more (<p>srefill) once half are used,
or at once when it found itself past its horizon after downtime.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  name
ARGV[2]  spec the ticks were planned against (the call is a no-op if it changed since)
ARGV[3]  horizon: the last tick computed (every tick up to it is given or was dropped)
ARGV[4]  dropped: past ticks left out by the catch-up policy (counted as missed)
ARGV[5..] the ticks (ms, ascending); past ones only as many as the policy may fire
Returns  1 when stored, 0 when the schedule is gone, changed or already refilled
         further (refills are idempotent: ticks derive from the spec alone).
Errors   DURQ_WRONGTYPE when a schedule key holds another Redis type, before any change.
Cost     O(ticks given).
]]
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/type_check"
--- @include "lib/schedules/keys"

local name = ARGV[1]
local key, tk = sch_key(name), sch_ticks(name)
local problem = type_error(key, 'hash') or type_error(tk, 'zset')
  or type_error(K_SCHED, 'zset') or type_error(K_SREFILL, 'zset')
if problem then return wrongtype(problem) end
local s = sch_read(name)
local horizon = tonumber(ARGV[3])
if not s or s.kind ~= 'cron' or redis.call('HGET', key, 'spec') ~= ARGV[2]
  or s.horizon >= horizon then
  return 0
end
local now = now_ms()
local kept = {}
for i = 5, #ARGV do
  local t = tonumber(ARGV[i])
  if t > s.wm then kept[#kept + 1] = t; kept[#kept + 1] = ARGV[i] end
end
for i = 1, #kept, 1000 do
  redis.call('ZADD', tk, unpack(kept, i, math.min(i + 999, #kept)))
end
s.horizon = horizon
redis.call('HSET', key, 'horizon', ms(horizon))
local dropped = tonumber(ARGV[4]) or 0
if dropped > 0 then
  redis.call('HINCRBY', key, 'missed', dropped)
  redis.pcall('HINCRBY', K_STATS, 'ticks_missed', dropped)
end
-- the next refill once half of the upcoming ticks are used
local future = {}
for i = 1, #kept, 2 do
  if kept[i] > now then future[#future + 1] = kept[i + 1] end
end
redis.call('ZADD', K_SREFILL, future[math.max(1, math.floor(#future / 2))] or ms(now), name)
if sch_plan(s) then redis.call('ZADD', K_WAKE, 0, '0') end
return 1
