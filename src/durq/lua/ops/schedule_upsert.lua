--[[ schedule_upsert: create or change a periodic schedule, never re-firing a tick.
KEYS     the queue key vector (lib/core/keys.lua); the schedule keys derive from the prefix
         (lib/schedules/keys.lua)
ARGV[1]  name
ARGV[2]  spec: the timing identity (kind, interval or cron and time zone, start, end);
         a schedule whose spec is unchanged keeps its timing and watermark
ARGV[3]  kind: 'every' or 'cron'
ARGV[4]  every: interval in ms ('every'), else 0
ARGV[5]  start: ms of the first possible tick, 0: none
ARGV[6]  ends: ms after which no tick fires, 0: never
ARGV[7]  catch: 'latest', 'all' or 'none';  ARGV[8] cap (ticks 'all' fires at most)
ARGV[9]  grace: ms a tick may be late and still fire under 'none'
ARGV[10] overlap: 'allow' or 'skip'
ARGV[11] head: the job payload up to its tick time (JSON text)
ARGV[12] max_attempts of the jobs
ARGV[13] enabled: '1' or '0' (applied when it differs from what was declared before: a
         runtime pause or resume otherwise stands, whatever else changes)
ARGV[14] origin: 'code' (declared in an App) or 'api'
ARGV[15] task name;  ARGV[16] info: a JSON summary shown by list
ARGV[17] '1' when cron ticks follow, else '0'
ARGV[18] the spec the ticks were planned against ('' for a new schedule)
ARGV[19] horizon: the last tick computed;  ARGV[20..] the ticks (ms, ascending)
Returns  {'created' | 'changed' | 'updated' | 'unchanged', next_due or false}, or
         {'ticks', after, now, spec}: a cron schedule whose timing is new needs its
         upcoming ticks (those > after): call again with them and that (old) spec. A
         change of timing applies from the first tick after the change: the watermark
         moves to now, so no tick that fired, nor any tick before the change, fires
         again.
Errors   DURQ_ARG for an unknown kind; DURQ_WRONGTYPE when a schedule key holds another
         Redis type; both before any change.
Cost     O(ticks given) commands; O(1) when the timing is unchanged.
]]
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/type_check"
--- @include "lib/schedules/keys"

local name, spec, kind = ARGV[1], ARGV[2], ARGV[3]
if kind ~= 'every' and kind ~= 'cron' then
  return redis.error_reply('DURQ_ARG unknown schedule kind ' .. kind)
end
local key, tk = sch_key(name), sch_ticks(name)
local problem = type_error(key, 'hash') or type_error(tk, 'zset')
  or type_error(K_SCHED, 'zset') or type_error(K_SNAMES, 'zset')
  or type_error(K_SREFILL, 'zset') or type_error(K_WAKE, 'zset')
if problem then return wrongtype(problem) end

local now = now_ms()
local old_spec = redis.call('HGET', key, 'spec')
local enabled = ARGV[13] == '1'
local behaviour = {'catch', ARGV[7], 'cap', ARGV[8], 'grace', ARGV[9], 'overlap', ARGV[10],
  'head', ARGV[11], 'maxatt', ARGV[12], 'origin', ARGV[14], 'task', ARGV[15], 'info', ARGV[16]}

if old_spec == spec then
  local status = 'unchanged'
  local current = redis.call('HMGET', key, 'catch', 'cap', 'grace', 'overlap', 'head',
    'maxatt', 'origin', 'task', 'info')
  for i = 1, #current do
    if current[i] ~= behaviour[2 * i] then status = 'updated' end
  end
  if status == 'updated' then
    redis.call('HSET', key, 'updated', now, unpack(behaviour))
  end
  local s = sch_read(name)
  if (redis.call('HGET', key, 'decl') == '1') ~= enabled then
    -- the code's enabled flag changed: apply it (a runtime pause or resume otherwise
    -- survives upserts, e.g. every worker start)
    s.paused = not enabled
    if enabled then s.wm = math.max(s.wm, now) end
    redis.call('HSET', key, 'decl', enabled and '1' or '0', 'paused', s.paused and '1' or '0',
      'wm', ms(s.wm))
    status = 'updated'
  end
  local due = redis.call('ZSCORE', K_SCHED, name)
  if status == 'updated' then
    redis.call('ZREMRANGEBYSCORE', tk, '-inf', s.wm)
    due = sch_plan(s)
    if due then redis.call('ZADD', K_WAKE, 0, '0') end
  end
  return {status, due and tonumber(due) or false}
end

-- a new schedule, or its timing changed. A runtime pause or resume stands, as above:
-- only a change of the declared enabled flag overrides it.
local paused = not enabled
local decl = redis.call('HGET', key, 'decl')
if old_spec and decl and (decl == '1') == enabled then
  paused = redis.call('HGET', key, 'paused') == '1'
end
local start = tonumber(ARGV[5])
local wm = math.max(now, start - 1, tonumber(redis.call('HGET', key, 'wm')) or 0)
if kind == 'cron' and (ARGV[17] ~= '1' or ARGV[18] ~= (old_spec or '')) then
  return {'ticks', wm, now, old_spec or ''}
end
local ver = redis.call('HINCRBY', key, 'ver', 1)
local anchor = now
if start > 0 then anchor = start end
redis.call('HSET', key, 'spec', spec, 'kind', kind, 'every', ARGV[4], 'anchor', anchor,
  'ends', ARGV[6], 'wm', ms(wm), 'decl', enabled and '1' or '0',
  'paused', paused and '1' or '0', 'ended', '0', 'updated', now, unpack(behaviour))
redis.call('HSETNX', key, 'created', now)
redis.call('ZADD', K_SNAMES, 0, name)
redis.call('DEL', tk)
redis.call('ZREM', K_SREFILL, name)
if kind == 'cron' then
  local horizon = tonumber(ARGV[19])
  local kept = {}
  for i = 20, #ARGV do
    local t = tonumber(ARGV[i])
    if t > wm then kept[#kept + 1] = t; kept[#kept + 1] = ARGV[i] end
  end
  for i = 1, #kept, 1000 do
    redis.call('ZADD', tk, unpack(kept, i, math.min(i + 999, #kept)))
  end
  redis.call('HSET', key, 'horizon', ms(horizon))
  -- refill once half the stored ticks are used
  local mid = kept[2 * math.max(1, math.floor(#kept / 4))] or ms(now)
  redis.call('ZADD', K_SREFILL, mid, name)
else
  redis.call('HSET', key, 'horizon', 0)
end
local s = sch_read(name)
local due = sch_plan(s)
if due then redis.call('ZADD', K_WAKE, 0, '0') end
local status = 'changed'
if ver == 1 then status = 'created' end
return {status, due or false}
