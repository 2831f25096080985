--- @include "lib/keys"
--- @include "lib/sched_fire"
--- @include "lib/group_keys"
--- @include "lib/type_check"

-- Materialising the due ticks of periodic schedules, inside dequeue next to the
-- promotion of delayed jobs: whichever consumer comes first does it, atomically, so no
-- leader is needed and any number of workers may run. The guard against firing a tick
-- twice is the schedule's watermark (ticks <= wm are done), never whether a job with
-- the tick's id still exists (a finished job's id is free again).
local SCHED_MAX = 100     -- due schedules handled per call at most
local STALE_RETRY = 1000  -- ms before a cron schedule waiting for a refill is looked at again

-- How many of `n` due ticks (the newest one `newest`) the catch-up policy fires.
local function sch_take(s, n, newest, now)
  if n <= 0 then return 0 end
  if s.catch == 'all' then return math.min(n, math.max(s.cap, 1)) end
  if s.catch == 'none' and now - newest > s.grace then return 0 end
  return 1
end

-- One due schedule: fire its due ticks as its policies say, advance its watermark past
-- all of them, and plan its next tick.
local function sch_run(name, now)
  local s = sch_read(name)
  if s == false then -- another type: leave the schedule out until the key is repaired
    redis.call('ZREM', K_SCHED, name)
    count('corrupt', 1)
    return
  end
  if s == nil or s.paused then
    redis.call('ZREM', K_SCHED, name)
    return
  end
  local upto = now
  if s.ends > 0 and s.ends < upto then upto = s.ends end
  local ticks, n = {}, 0 -- ticks to fire (oldest first), due ticks in all
  local newest = s.wm
  if s.kind == 'every' then
    if upto >= s.anchor then
      local k_now = math.floor((upto - s.anchor) / s.every)
      local k_wm = -1
      if s.wm >= s.anchor then k_wm = math.floor((s.wm - s.anchor) / s.every) end
      n = k_now - k_wm
      if n > 0 then newest = s.anchor + k_now * s.every end
      local take = sch_take(s, n, newest, now)
      for i = take - 1, 0, -1 do ticks[#ticks + 1] = newest - i * s.every end
    end
  else
    if upto > s.horizon then
      -- ticks after the horizon are not known yet: fire nothing (a tick fired now might
      -- not be the newest), ask for a refill and look again shortly
      redis.call('ZADD', K_SREFILL, 0, name)
      redis.call('ZADD', K_SCHED, now + STALE_RETRY, name)
      return
    end
    local tk = sch_ticks(name)
    n = redis.call('ZCOUNT', tk, '(' .. ms(s.wm), upto)
    if n > 0 then
      local top = redis.call('ZREVRANGEBYSCORE', tk, upto, '(' .. ms(s.wm), 'LIMIT', 0, 1)
      newest = tonumber(top[1])
      local take = sch_take(s, n, newest, now)
      if take > 0 then
        local got = redis.call('ZREVRANGEBYSCORE', tk, upto, '(' .. ms(s.wm), 'LIMIT', 0, take)
        for i = #got, 1, -1 do ticks[#ticks + 1] = tonumber(got[i]) end
      end
    end
    redis.call('ZREMRANGEBYSCORE', tk, '-inf', upto)
  end
  local skipped = 0
  for i = 1, #ticks do
    if s.overlap == 'skip' and sch_running(s.current) then
      skipped = skipped + 1
    else
      sch_fire(s, ticks[i], now)
    end
  end
  local missed = n - #ticks
  if skipped > 0 then
    redis.call('HINCRBY', sch_key(name), 'skipped', skipped)
    count('ticks_skipped', skipped)
  end
  if missed > 0 then
    redis.call('HINCRBY', sch_key(name), 'missed', missed)
    count('ticks_missed', missed)
  end
  if n > 0 then
    s.wm = newest
    redis.call('HSET', sch_key(name), 'wm', ms(newest))
  end
  sch_plan(s)
end

-- Materialise every due schedule (at most SCHED_MAX); returns how many were due. Before
-- its first write it calls before_write (dequeue's check of its keys, lib/types.lua):
-- when that returns a problem, it returns 0 and the problem, having changed nothing.
local function schedules_due(now, before_write)
  local names = redis.pcall('ZRANGEBYSCORE', K_SCHED, '-inf', now, 'LIMIT', 0, SCHED_MAX)
  if names.err or #names == 0 then return 0 end
  -- the default group's list takes the jobs: garbage there would fail the call midway
  if type_error(ready_list(''), 'list') then return 0 end
  local problem = before_write()
  if problem then return 0, problem end
  for i = 1, #names do sch_run(names[i], now) end
  return #names
end

-- `nxt` (ms until the next job or lease is due, -1: none) made earlier by the next tick
-- of a schedule, so that idle consumers wake for it without polling.
local function schedules_next(now, nxt)
  local first = redis.pcall('ZRANGE', K_SCHED, 0, 0, 'WITHSCORES')
  if first.err or not first[2] then return nxt end
  local t = math.max(0, tonumber(first[2]) - now)
  if nxt < 0 or t < nxt then return t end
  return nxt
end
