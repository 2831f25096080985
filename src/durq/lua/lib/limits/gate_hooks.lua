--- @include "lib/core/keys"
--- @include "lib/groups/offer"
--- @include "lib/limits/conf"
--- @include "lib/limits/rate_limit"
--- @include "lib/limits/park"

-- The flow-control hooks of dequeue (rate limits, max_active, pauses; lib/limits/conf.lua).
-- lib/limits/gate.lua includes this file inside a function, which returns the table at the end:
-- include it nowhere else.
local flow_blocked = false -- the queue's own rate or max_active allows no more starts now
local queue_base = nil     -- the queue limiter's TAT as counted in this call
local group_limiter = {}   -- g -> {rate, base}, for the groups served in this call

-- Before serving: bring back the parked groups whose time has come, and return how
-- many of `want` jobs the queue's rate (or pause) and max_active allow now.
local function flow_begin(now, want)
  local f = get_flow()
  if not f.on then return want end
  if f.release then
    release_parked(PARK_MAX) -- every limit was removed (lib/limits/park.lua unpark_all)
  else
    unpark_due(now)
  end
  local room = want
  if f.max_active > 0 then
    local free = f.max_active - redis.call('ZCARD', K_ACTIVE)
    if free < room then room = math.max(free, 0) end
  end
  if room > 0 and (f.qrate or f.tat) then
    room, queue_base = gcra_room(f.tat, f.qrate, now, room)
  end
  if room < want then flow_blocked = true end
  return room
end

-- At group g's turn: how much of `quota` its rate (or pause) allows; 0 parks it (unless
-- `stay`: a group served outside the rotation, dequeue.lua's batch top-up, stays put).
local function flow_group_quota(g, quota, now, stay)
  local f = get_flow()
  if not f.per_group then return quota end
  local rate = group_rate_of(g)
  local gk = K_PREFIX .. 'gtat'
  local tat = tonumber(redis.call('HGET', gk, g))
  if rate == nil and tat ~= nil and tat <= now then
    redis.call('HDEL', gk, g) -- a pause that is over: nothing to keep
    tat = nil
  end
  if rate == nil and tat == nil then
    group_limiter[g] = nil
    return quota
  end
  local room, base = gcra_room(tat, rate, now, quota)
  group_limiter[g] = {rate = rate, base = base}
  if room == 0 and not stay then park_group(g, gcra_next(base, rate)) end
  return room
end

-- Group g's turn handed out `got` jobs: its limiter moves on. A TAT that is past
-- counts as none (gcra_room), and a group that never comes back would keep its field for
-- good: each write also looks at two fields picked at random and drops those past, so
-- the hash holds at most about twice the groups started in the last few seconds.
local function flow_group_started(g, got, now)
  local l = group_limiter[g]
  if not l or not l.rate or got == 0 then return end
  l.base = gcra_after(l.base, l.rate, got)
  local gk = K_PREFIX .. 'gtat'
  redis.call('HSET', gk, g, tat_text(l.base))
  local some = redis.call('HRANDFIELD', gk, 2, 'WITHVALUES')
  for i = 1, #some, 2 do
    if tonumber(some[i + 1]) <= now then redis.call('HDEL', gk, some[i]) end
  end
end

-- After group g's turn: true when it has more ready jobs but its limiter is spent, and
-- so was parked (it then leaves K_RR and stays in K_RRSET).
local function flow_group_parked(g, more, now)
  local l = group_limiter[g]
  if not more or not l then return false end
  if gcra_room(l.base, l.rate, now, 1) > 0 then return false end
  park_group(g, gcra_next(l.base, l.rate))
  return true
end

-- After serving `handed` jobs: the queue limiter and its starts per second are stored,
-- and the time idle consumers should look again for limited work joins `nxt` (dequeue's
-- next_ms so far, -1: none) for the one consumer `me` that holds the alarm.
local function flow_end(now, handed, nxt, me)
  local f = get_flow()
  if not f.on then return nxt end
  if handed > 0 then
    local sec = math.floor(now / 1000)
    local cur, prev = handed, 0
    if f.sec == sec then
      cur, prev = f.cur + handed, f.prev
    elseif f.sec == sec - 1 then
      prev = f.cur
    end
    if f.qrate then
      queue_base = gcra_after(queue_base, f.qrate, handed)
      redis.call('HSET', K_PREFIX .. 'flow', 'sec', sec, 'cur', cur, 'prev', prev, 'tat',
        tat_text(queue_base))
      if gcra_room(queue_base, f.qrate, now, 1) == 0 then flow_blocked = true end
    else
      redis.call('HSET', K_PREFIX .. 'flow', 'sec', sec, 'cur', cur, 'prev', prev)
      if f.tat then redis.call('HDEL', K_PREFIX .. 'flow', 'tat') end -- its pause is over
    end
    if f.max_active > 0 and redis.call('ZCARD', K_ACTIVE) >= f.max_active then
      flow_blocked = true
    end
  end
  if nxt == 0 then return 0 end
  local at = earliest_park()
  if queue_base and gcra_room(queue_base, f.qrate, now, 1) == 0 and
      redis.call('LLEN', K_RR) > 0 then
    -- the queue's own rate (or pause) holds back listed work
    local q_at = gcra_next(queue_base, f.qrate)
    if not at or q_at < at then at = q_at end
  end
  if not at then return nxt end
  if at <= now then return 0 end
  if handed > 0 then
    -- this consumer leaves with jobs: an idle one takes the alarm (the wake-up chain)
    if not alarm_holder(now, at) then need_wake = true end
    return nxt
  end
  local plan = claim_alarm(now, at, me)
  if plan and (nxt < 0 or plan - now < nxt) then nxt = plan - now end
  return nxt
end

return {
  problem = function() return flow_error(false) end,
  begin = flow_begin,
  group_quota = flow_group_quota,
  group_started = flow_group_started,
  group_parked = flow_group_parked,
  finish = flow_end,
  blocked = function() return flow_blocked end,
  only_parked_listed = only_parked_listed,
  relist_parked = relist_parked,
}
