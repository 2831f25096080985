--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/conf"
--- @include "lib/core/record"
--- @include "lib/core/counters"
--- @include "lib/groups/slots"
--- @include "lib/groups/offer"
--- @include "lib/control/job_control"
--- @include "lib/core/delayed"
--- @include "lib/core/types"
--- @include "lib/core/enqueue_one"
--- @include "lib/workflows/link"
--- @include "lib/workflows/stop"
--- @include "lib/holding/keys"

-- Workflow steps in the queue the K_* keys name (lib/core/bind_prefix.lua points them at each
-- queue of the slot in turn): starting them (linked to their workflow) and stopping
-- them. Made on first use by the engine (lib/workflows/fan_in.lua), which lends its `hmget`.
local function wf_queue_build(hmget)
  local JSON_CODEC = 1 -- durq.codec.Codec.JSON

  local function wf_reset_helpers()
    counts, ready_delta, ready_groups = {}, {}, {}
    touched, touched_list, need_wake = {}, {}, false
    earliest_due, conf_cache = nil, nil
    control_fns = nil -- lib/control/job_control names its keys from the prefix when it is built
  end

  -- Stop step `id` of workflow wid in the queue K_* name, if it is still linked (not
  -- finished; a step whose start never applied has no link: nothing to do). A step that
  -- did not start ends cancelled (lib/workflows/stop.lua); a dead one waited for is unlinked;
  -- a running one: kind 'X' (failed) lets it finish, its release reports to the ended
  -- run, which ignores it; kind 'K' (cancelled) flags it as cancel.lua flags a running
  -- job: its worker stops it and its release ends it cancelled.
  local function wf_cancel_one(wid, id, now, kind)
    if redis.call('HEXISTS', K_PREFIX .. WF_LINKS, id) == 0 then return end
    local r = rec_decode(redis.call('HGET', K_JOBS, id))
    if r and r.state == ST_ACTIVE then
      if kind == 'K' and bit.band(r.flags, FLAG_CANCEL) == 0 then
        r.flags = bit.bor(r.flags, FLAG_CANCEL)
        redis.call('HSET', K_JOBS, id, rec_encode(r))
        -- a hint only, as in cancel.lua: the flag is the truth
        redis.pcall('PUBLISH', K_PREFIX .. 'cancel', id)
      end
      return
    end
    if not r or (r.state ~= ST_PENDING and r.state ~= ST_DELAYED and r.state ~= ST_HELD) then
      redis.call('HDEL', K_PREFIX .. WF_LINKS, id)
      return
    end
    local listed = false
    if r.state == ST_DELAYED then
      redis.call('ZREM', K_DELAYED, id)
    elseif r.state == ST_HELD then
      held_forget(id)
    elseif r.prio ~= 0 then
      redis.pcall('ZREM', ready_prio(r.group), id)
      ready_add(r.group, -1)
    else
      listed = true
      ready_add(r.group, -1)
    end
    wf_stop_unstarted(id, r, now, kind, wid, listed)
  end

  -- Job control for a step started with an expiry (lib/control/job_control.lua: dequeue ends it
  -- expired when it has not started by then).
  local function wf_expiry(id, expiry, now)
    local kind, value = string.match(expiry, '^(%a+):(%d+)$')
    if not kind then return end
    local at = tonumber(value)
    if kind == 'in' then at = now + at end
    redis.call('HSET', K_PREFIX .. 'ctl', id, cjson.encode({e = at}))
    local r = rec_decode(redis.call('HGET', K_JOBS, id))
    r.flags = bit.bor(r.flags, FLAG_CONTROL)
    redis.call('HSET', K_JOBS, id, rec_encode(r))
  end

  -- Enqueue steps without delay, priority or expiry into the queue K_* name, linked to
  -- their workflow: a few commands per batch (as enqueue_plain.lua does), not per step.
  -- An id that exists or is still taken (tombstone) is a start applied before: skipped.
  local function wf_push_plain(now, items)
    if #items == 0 then return end
    local ids = {}
    for i = 1, #items do ids[i] = items[i][1] end
    local recs = hmget(K_JOBS, ids)
    local tombs = {}
    for i = 1, #ids, 1000 do
      local part = redis.call('ZMSCORE', K_DONE, unpack(ids, i, math.min(i + 999, #ids)))
      for j = 1, #part do tombs[#tombs + 1] = part[j] end
    end
    local by_group, groups, fields, links, stale, heads, seen = {}, {}, {}, {}, {}, {}, {}
    for i = 1, #items do
      local it, t = items[i], tombs[i] and tonumber(tombs[i])
      if not recs[i] and not seen[it[1]] and not (t and t > now) then
        seen[it[1]] = true
        if t then stale[#stale + 1] = it[1] end
        local g = it[6]
        if not by_group[g] then
          by_group[g] = {}
          groups[#groups + 1] = g
        end
        local list = by_group[g]
        list[#list + 1] = it[1]
        local hk = it[5] .. ':' .. g
        heads[hk] = heads[hk] or rec_new(ST_PENDING, 0, JSON_CODEC, it[5], now, g, '', '')
        fields[#fields + 1] = it[1]
        fields[#fields + 1] = heads[hk] .. it[2]
        links[#links + 1] = it[1]
        links[#links + 1] = it[7]
      end
    end
    if #fields == 0 then return end
    for i = 1, #stale, 1000 do
      redis.call('ZREM', K_DONE, unpack(stale, i, math.min(i + 999, #stale)))
    end
    for _, g in ipairs(groups) do
      local list = by_group[g]
      for i = 1, #list, 1000 do
        redis.call('RPUSH', ready_list(g), unpack(list, i, math.min(i + 999, #list)))
      end
      ready_add(g, #list)
      touch(g)
    end
    for i = 1, #fields, 2000 do
      redis.call('HSET', K_JOBS, unpack(fields, i, math.min(i + 1999, #fields)))
      redis.call('HSET', K_PREFIX .. WF_LINKS, unpack(links, i, math.min(i + 1999, #links)))
    end
    count('enqueued', #fields / 2)
  end

  local WF_QUEUE_PARTS = {'jobs', 'done', 'rr', 'rrset', 'conf', 'delayed', 'glimit', 'gactive',
    'reasons', 'stats', 'ctl'}

  -- The problem with the keys of queue K_* that starting `items` there would use, or nil.
  local function wf_start_problem(items)
    local problem = keys_error(WF_QUEUE_PARTS)
    for i = 1, #items do problem = problem or group_error(items[i][6]) end
    return problem
  end

  -- Enqueue `items` into the queue K_* name (its keys checked), linked to their workflow.
  local function wf_enqueue_here(now, items)
    local plain = {}
    for i = 1, #items do
      local it = items[i]
      if it[3] == 0 and it[4] == 0 and it[8] == '' then
        plain[#plain + 1] = it
      else
        local status = enqueue_one(now, it[1], it[2], it[3], it[4], it[5], JSON_CODEC, it[6],
          '', '0')
        if status == S_CREATED then
          redis.call('HSET', K_PREFIX .. WF_LINKS, it[1], it[7])
          if it[8] ~= '' then wf_expiry(it[1], it[8], now) end
        end
      end
    end
    wf_push_plain(now, plain)
  end

  return {reset = wf_reset_helpers, stop_one = wf_cancel_one, problem = wf_start_problem,
    enqueue = wf_enqueue_here, parts = WF_QUEUE_PARTS}
end
