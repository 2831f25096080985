--- @include "lib/core/keys"
--- @include "lib/schedules/fire"
--- @include "lib/groups/keys"
--- @include "lib/core/type_check"
--- @include "lib/core/budget"

-- Materialising the due ticks of periodic schedules, inside dequeue next to the
-- promotion of delayed jobs: whichever consumer comes first does it, atomically, so no
-- leader is needed and any number of workers may run. The guard against firing a tick
-- twice is the schedule's watermark (ticks <= wm are done), never whether a job with
-- the tick's id still exists (a finished job's id is free again).
--
-- A catch-up is spread over calls. When a schedule is found due, its policy decides at
-- once which of its due ticks fire (sch_decide: the newest `cap` under 'all', the
-- newest under 'latest', none that is late under 'none'): the others count as missed,
-- the watermark moves to just before the first tick to fire, and `cu` keeps the newest.
-- Those ticks then fire oldest first, as many per call as the call's budget allows
-- (lib/core/budget.lua), the watermark following each tick fired or skipped, so a tick still
-- fires at most once and the decision holds however long the catch-up takes; until it
-- is done the schedule stays due. Ticks that fall due meanwhile are decided after it.
-- A call decides for the due schedules it reads before it fires any tick, so that one
-- schedule's long catch-up does not delay the others' decisions (one with a catch-up
-- under way costs that pass an HMGET of two fields).
local SCHED_MAX = 100     -- due schedules looked at per call at most
local STALE_RETRY = 1000  -- ms before a cron schedule waiting for a refill is looked at again

-- How many of `n` due ticks (the newest one `newest`) the catch-up policy fires.
local function sch_take(s, n, newest, now)
  if n <= 0 then return 0 end
  if s.catch == 'all' then return math.min(n, math.max(s.cap, 1)) end
  if s.catch == 'none' and now - newest > s.grace then return 0 end
  return 1
end

-- Schedule s is due and has no catch-up under way: decide which of its due ticks (up to
-- `upto`) fire. Returns false when a cron schedule is past the ticks it knows: it then
-- asks for a refill and is looked at again shortly, deciding nothing (a tick fired now
-- might not be the newest).
local function sch_decide(s, upto, now)
  local n, take, newest, first = 0, 0, nil, nil -- due, to fire, the newest, the oldest to fire
  if s.kind == 'every' then
    if upto >= s.anchor then
      local k_now = math.floor((upto - s.anchor) / s.every)
      local k_wm = -1
      if s.wm >= s.anchor then k_wm = math.floor((s.wm - s.anchor) / s.every) end
      n = k_now - k_wm
      newest = s.anchor + k_now * s.every
      take = sch_take(s, n, newest, now)
      if take > 0 then first = newest - (take - 1) * s.every end
    end
  else
    if upto > s.horizon then
      redis.call('ZADD', K_SREFILL, 0, s.name)
      redis.call('ZADD', K_SCHED, now + STALE_RETRY, s.name)
      return false
    end
    local tk, after = sch_ticks(s.name), '(' .. ms(s.wm)
    n = redis.call('ZCOUNT', tk, after, upto)
    if n > 0 then
      newest = tonumber(redis.call('ZREVRANGEBYSCORE', tk, upto, after, 'LIMIT', 0, 1)[1])
      take = sch_take(s, n, newest, now)
      if take > 0 then
        first = tonumber(redis.call('ZREVRANGEBYSCORE', tk, upto, after, 'LIMIT', take - 1, 1)[1])
      end
    end
  end
  if n <= 0 then return true end
  local missed = n - take
  if missed > 0 then
    redis.call('HINCRBY', sch_key(s.name), 'missed', missed)
    count('ticks_missed', missed)
  end
  if first then
    s.wm, s.cu = first - 1, newest -- ticks are whole ms: every missed tick is <= first - 1
  else
    s.wm = newest
  end
  redis.call('HSET', sch_key(s.name), 'wm', ms(s.wm), 'cu', ms(s.cu))
  if s.kind ~= 'every' then redis.call('ZREMRANGEBYSCORE', sch_ticks(s.name), '-inf', s.wm) end
  return true
end

-- Fire the decided ticks of s, oldest first, while the budget lasts (`fired`: ticks this
-- call fired before; the first of the call always fires, and the clock, which costs
-- about a tenth of a tick, is read every 4 ticks). Returns how many it fired and whether
-- the catch-up is done.
local function sch_catch_up(s, now, fired)
  local running = s.overlap == 'skip' and sch_running(s.current)
  local n, skipped, done = 0, 0, true
  while done and s.wm < s.cu do
    local ticks = {} -- the next 100 ticks after the watermark, oldest first
    if s.kind == 'every' then
      local t = sch_every_after(s, s.wm)
      while t <= s.cu and #ticks < 100 do
        ticks[#ticks + 1] = t
        t = t + s.every
      end
    else
      local got = redis.call('ZRANGEBYSCORE', sch_ticks(s.name), '(' .. ms(s.wm), s.cu,
        'LIMIT', 0, 100)
      for i = 1, #got do ticks[i] = tonumber(got[i]) end
    end
    if #ticks == 0 then s.wm = s.cu end -- (a cron tick list cut short: nothing left)
    for i = 1, #ticks do
      if running then
        skipped = skipped + 1
      elseif fired + n > 0 and (fired + n) % 4 == 0 and budget_spent() then
        done = false
        break
      else
        sch_fire(s, ticks[i], now)
        n = n + 1
        running = s.overlap == 'skip' -- its job has not finished: the next ticks skip
      end
      s.wm = ticks[i]
    end
  end
  redis.call('HSET', sch_key(s.name), 'wm', ms(s.wm))
  if s.kind ~= 'every' then redis.call('ZREMRANGEBYSCORE', sch_ticks(s.name), '-inf', s.wm) end
  if skipped > 0 then
    redis.call('HINCRBY', sch_key(s.name), 'skipped', skipped)
    count('ticks_skipped', skipped)
  end
  return n, done
end

-- The due schedule `name`, read: nil when it has nothing to fire (gone, paused, of
-- another type, waiting for a refill, or decided to fire nothing), else its state with
-- its due ticks decided.
local function sch_due(name, now)
  local s = sch_read(name)
  if s == false then -- another type: leave the schedule out until the key is repaired
    redis.call('ZREM', K_SCHED, name)
    count('corrupt', 1)
    return nil
  end
  if s == nil or s.paused then
    redis.call('ZREM', K_SCHED, name)
    return nil
  end
  if s.wm >= s.cu then
    local upto = now
    if s.ends > 0 and s.ends < upto then upto = s.ends end
    if not sch_decide(s, upto, now) then return nil end
    if s.wm >= s.cu then -- nothing to fire: plan its next tick
      sch_plan(s)
      return nil
    end
  end
  return s
end

-- Decide and fire the due ticks of the due schedules (at most SCHED_MAX), as the call's
-- budget allows; returns whether some are left for the next call. Before its first
-- write it calls before_write (dequeue's check of its keys, lib/core/types.lua): when that
-- returns a problem, it returns false and the problem, having changed nothing.
local function schedules_due(now, before_write)
  local names = redis.pcall('ZRANGEBYSCORE', K_SCHED, '-inf', now, 'LIMIT', 0, SCHED_MAX)
  if names.err or #names == 0 then return false end
  -- the default group's list takes the jobs: garbage there would fail the call midway
  if type_error(ready_list(''), 'list') then return false end
  local problem = before_write()
  if problem then return false, problem end
  -- first decide (a schedule whose catch-up is under way is read whole at its turn)
  local due, left = {}, #names == SCHED_MAX
  for i = 1, #names do
    if i > 1 and budget_spent() then
      left = true
      break
    end
    local mark = redis.pcall('HMGET', sch_key(names[i]), 'wm', 'cu')
    if type(mark[1]) == 'string' and tonumber(mark[1]) < (tonumber(mark[2]) or 0) then
      due[#due + 1] = names[i]
    else
      due[#due + 1] = sch_due(names[i], now)
    end
  end
  -- then fire, oldest due first
  local fired = 0
  for i = 1, #due do
    local s = due[i]
    if type(s) == 'string' then s = sch_due(s, now) end
    if s then
      local n, done = sch_catch_up(s, now, fired)
      fired = fired + n
      sch_plan(s) -- due at once while ticks are left
      if not done then
        left = true
        break
      end
    end
  end
  return left
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
