--- @include "lib/core/keys"
--- @include "lib/core/record"

-- Periodic schedules (durq.app.schedule_spec). Every key lives under the queue's prefix, so in
-- the queue's Redis Cluster slot; mirrored by durq.protocol.schedules.ScheduleKeys:
--   <p>sched          zset  enabled schedule -> next due time (ms); dequeue reads it
--   <p>snames         zset  every schedule, score 0 (listing in name order)
--   <p>srefill        zset  cron schedule -> time (ms) its stored ticks want a refill
--   <p>sch:<name>     hash  the schedule's spec and state (fields below)
--   <p>sticks:<name>  zset  a cron schedule's upcoming ticks (member and score: ms)
-- State fields: spec (timing identity), ver (bumped when the timing changes), kind
-- ('every' or 'cron'), every and anchor (ms: ticks at anchor + k * every), ends (ms, 0:
-- never), wm (the watermark: every tick <= wm is done, fired or not, and never fires
-- again), horizon (cron: every tick <= horizon is stored or was deliberately dropped),
-- catch ('latest', 'all', 'none'), cap, grace (ms a tick may be late and still fire
-- under 'none'), overlap ('allow', 'skip'), head (the payload up to the tick time),
-- maxatt, paused ('1'), decl (the enabled flag the code declared), ended ('1'), origin,
-- task, info (JSON shown to people), current (the last fired job's id), last_tick,
-- last_at, fired, skipped, missed, created, updated; cu (the newest tick of a catch-up
-- under way: the ticks in (wm, cu] were decided to fire, lib/schedules/due.lua).
local SCH_CODEC_JSON = 1 -- the payload head is JSON text (durq.codec.Codec.JSON)
local SCH_FIELDS = {'kind', 'every', 'anchor', 'ends', 'wm', 'horizon', 'catch', 'cap',
  'grace', 'overlap', 'head', 'maxatt', 'paused', 'current', 'ver', 'cu'}

local function sch_key(name) return K_PREFIX .. 'sch:' .. name end
local function sch_ticks(name) return K_PREFIX .. 'sticks:' .. name end
--- @per-call (reset at the start of every call: lua/functions.py)
local K_SCHED = K_PREFIX .. 'sched'
local K_SNAMES = K_PREFIX .. 'snames'
local K_SREFILL = K_PREFIX .. 'srefill'
--- @end

local function ms(n) return string.format('%d', n) end

-- The schedule's state (numbers converted), or nil when its hash is missing; false when
-- the key holds another Redis type.
local function sch_read(name)
  local raw = redis.pcall('HMGET', sch_key(name), unpack(SCH_FIELDS))
  if raw.err then return false end
  if not raw[1] then return nil end
  local s = {name = name}
  for i = 1, #SCH_FIELDS do s[SCH_FIELDS[i]] = raw[i] end
  for _, f in ipairs({'every', 'anchor', 'ends', 'wm', 'horizon', 'cap', 'grace',
                      'maxatt', 'ver', 'cu'}) do
    s[f] = tonumber(s[f]) or 0
  end
  s.paused = s.paused == '1'
  return s
end

-- Whether the job `id` (the schedule's last) has not finished: waiting, retrying or
-- running. A finished job's record is gone, or kept as completed or dead.
local function sch_running(id)
  if not id or id == '' then return false end
  local r = rec_decode(redis.call('HGET', K_JOBS, id))
  return r ~= nil and (r.state == ST_PENDING or r.state == ST_DELAYED or r.state == ST_ACTIVE
    or r.state == ST_HELD)
end

-- The first tick of an 'every' schedule after t.
local function sch_every_after(s, t)
  if t < s.anchor then return s.anchor end
  return s.anchor + (math.floor((t - s.anchor) / s.every) + 1) * s.every
end

-- Put the schedule in the due set at its next tick after the watermark, or take it out
-- (paused, ended). A cron schedule whose stored ticks ran out is due just after its
-- horizon: then it asks for a refill (lib/schedules/due.lua). Returns the due time or nil.
local function sch_plan(s)
  local key = sch_key(s.name)
  if s.paused then
    redis.call('ZREM', K_SCHED, s.name)
    return nil
  end
  local nxt
  if s.kind == 'every' then
    nxt = sch_every_after(s, s.wm)
  else
    local first = redis.call('ZRANGEBYSCORE', sch_ticks(s.name), '(' .. ms(s.wm), '+inf',
      'WITHSCORES', 'LIMIT', 0, 1)
    nxt = tonumber(first[2]) or (math.max(s.horizon, s.wm) + 1)
  end
  if s.ends > 0 and nxt > s.ends then
    redis.call('ZREM', K_SCHED, s.name)
    redis.call('HSET', key, 'ended', '1')
    return nil
  end
  redis.call('ZADD', K_SCHED, nxt, s.name)
  return nxt
end
