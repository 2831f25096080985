--- @include "lib/keys"
--- @include "lib/bind_prefix"
--- @include "lib/clock"
--- @include "lib/conf"
--- @include "lib/record"
--- @include "lib/counters"
--- @include "lib/slots"
--- @include "lib/offer"
--- @include "lib/control"
--- @include "lib/schedule"
--- @include "lib/reason"
--- @include "lib/types"
--- @include "lib/enqueue_one"
--- @include "lib/outbox"
--- @include "lib/wf_link"

-- Workflows (durq.workflows): the fan-in engine. A workflow lives in its home queue's
-- slot, under <home prefix>wf:<wid>, a hash holding its state and structure:
--   state, policy, created, finished, ttl, plan (JSON, for status), Q (JSON: queue
--   prefix -> leaf nodes, for cancelling), bars (the barriers, comma separated)
--   t<n>  the target of node n: "m:<b>" member of barrier b | "s:<x>" start node x | "e"
--   L<x>  the leaves that starting node x starts (comma separated; absent: x itself)
--   B<b>  the members of barrier b, in order (a group's children)
--   p<n>  the parked spec of leaf n, not started yet: NUL-separated queue prefix, group,
--         priority, max attempts, delay ms, mutable ('1': the input goes first), payload
--         head and tail (the input is spliced between them)
--   L0    the first steps (started by the submit)
--   c<x>, i<x>  where starting node x continues, and its input (large starts: wf_start)
--   r<n>  the recorded result (JSON) of member n until its barrier fires
--   w<n>  the reason of a dead member waited for (policy "wait")
-- and <home prefix>wf:<wid>:o:<b>, the set of barrier b's open members. A member's
-- completion is counted by membership: SREM, and only when it returned 1 the result is
-- recorded (HSETNX) and, once the set is empty, the barrier fires (its target runs with
-- the members' results as a JSON list, in order). A start consumes the parked specs (a
-- start applied twice finds none). Every step is therefore idempotent, and completions
-- delivered twice (a step run twice, an outbox entry delivered again) count once.
-- <home prefix>wfr lists running workflows (zset, by start time).
-- Steps started in this slot are enqueued at the end (fan_in_flush); steps and
-- completions for another slot leave through the outbox of the script's own queue.

-- The engine is built on first use: its closures cost nothing to the releases of a queue
-- that has no workflow steps (Lua re-creates every function of a script on each call).
local function wf_build()
  local WF_SELF = KEYS[1]                       -- the prefix of the script's own queue
  local WF_SLOT = string.match(KEYS[1], '{(.-)}')
  local JSON_CODEC = 1                          -- durq.codec.Codec.JSON

  local wf_now = nil
  local wf_local, wf_local_order = {}, {}       -- prefix -> steps to enqueue in this slot
  local wf_remote, wf_remote_order = {}, {}     -- prefix -> steps for another slot
  local wf_stops, wf_stops_order = {}, {}       -- prefix -> {wid, id} steps to cancel

  local function wf_tag(prefix)
    return string.match(prefix, '{(.-)}')
  end

  local function wf_bucket(prefix, same, other, same_order, other_order)
    local map, order = other, other_order
    if wf_tag(prefix) == WF_SLOT then map, order = same, same_order end
    local list = map[prefix]
    if not list then
      list = {}
      map[prefix] = list
      order[#order + 1] = prefix
    end
    return list
  end

  -- item = {id, payload, delay_ms, priority, max_attempts, group, link}
  local function wf_enqueue(prefix, item)
    local list = wf_bucket(prefix, wf_local, wf_remote, wf_local_order, wf_remote_order)
    list[#list + 1] = item
  end

  -- Cancel step `id` of workflow wid in queue prefix; `stop` (the workflow was
  -- cancelled): a running step is flagged to stop too (see wf_cancel_one).
  local function wf_cancel(prefix, wid, id, stop)
    local mk = (stop and 'K' or 'X') .. prefix
    local list = wf_stops[mk]
    if not list then
      list = {}
      wf_stops[mk] = list
      wf_stops_order[#wf_stops_order + 1] = mk
    end
    list[#list + 1] = {wid, id, stop}
  end

  local function wf_hmget(key, fields)
    local out = {}
    for i = 1, #fields, 1000 do
      local part = redis.call('HMGET', key, unpack(fields, i, math.min(i + 999, #fields)))
      for j = 1, #part do out[#out + 1] = part[j] end
    end
    return out
  end

  local function wf_hdel(key, fields)
    for i = 1, #fields, 1000 do
      redis.call('HDEL', key, unpack(fields, i, math.min(i + 999, #fields)))
    end
  end

  -- A workflow ended: its result is stored like a job's (<home>result:<wid>, a one-element
  -- list, so waiters block on it), a summary (state, times, plan, error) stays as long, and
  -- everything else goes: structure, open sets, leftovers of a failed run.
  local function wf_close(home, wid, wk, state, raw, err, cancelled)
    local keep = redis.call('HMGET', wk, 'policy', 'created', 'plan', 'ttl', 'bars')
    local ttl = tonumber(keep[4]) or 3600000
    for b in string.gmatch(keep[5] or '', '[^,]+') do redis.call('DEL', wk .. ':o:' .. b) end
    redis.call('DEL', wk)
    redis.call('HSET', wk, 'state', state, 'policy', keep[1] or 'fail', 'created', keep[2] or 0,
      'finished', wf_now, 'plan', keep[3] or '[]', 'ttl', ttl)
    if err then redis.call('HSET', wk, 'error', err) end
    if cancelled and #cancelled > 0 then
      redis.call('HSET', wk, 'cancelled', table.concat(cancelled, ','))
    end
    redis.call('PEXPIRE', wk, ttl)
    local rk = home .. 'result:' .. wid
    redis.call('DEL', rk)
    redis.call('RPUSH', rk, raw)
    redis.call('PEXPIRE', rk, ttl)
    redis.call('ZREM', home .. 'wfr', wid)
    redis.pcall('HINCRBY', home .. 'stats', 'wf_' .. state, 1)
  end

  local function wf_end(home, wid, wk, v)
    if redis.call('HGET', wk, 'state') ~= 'running' then return end
    wf_close(home, wid, wk, 'completed', '{"ok":true,"value":' .. v .. '}', nil)
  end

  -- The steps of a workflow that ends early: parked ones (never started) are listed,
  -- to be shown as cancelled; the others are cancelled in their queues (`stop`: running
  -- ones are flagged to stop too). Returns the parked leaves.
  local function wf_stop_steps(wid, wk, stop)
    local q = redis.call('HGET', wk, 'Q')
    local parked = {}
    if q then
      for prefix, leaves in pairs(cjson.decode(q)) do
        local fields = {}
        for i = 1, #leaves do fields[i] = 'p' .. tostring(leaves[i]) end
        local specs = wf_hmget(wk, fields)
        for i = 1, #leaves do
          local leaf = tostring(leaves[i])
          if specs[i] then
            parked[#parked + 1] = leaf
          else
            wf_cancel(prefix, wid, wid .. '.' .. leaf, stop)
          end
        end
      end
    end
    return parked
  end

  -- Policy "fail": the workflow ends failed with the reason; its parked steps are
  -- dropped (shown cancelled), and its steps that did not start end cancelled in their
  -- queues; a running one finishes, and its completion finds the workflow ended (see
  -- wf_cancel_one).
  local function wf_fail(home, wid, wk, n, reason)
    if redis.call('HGET', wk, 'state') ~= 'running' then return end
    local err = '{"reason":"child_failed","step":' .. n .. ',"job":' .. cjson.encode(wid .. '.' .. n)
      .. ',"error":' .. reason .. '}'
    local parked = wf_stop_steps(wid, wk, false)
    wf_close(home, wid, wk, 'failed', '{"ok":false,"error":' .. err .. '}', err, parked)
  end

  -- workflow_cancel.lua: the running workflow wid (at home, in this slot) ends cancelled.
  -- Its callback and other parked steps never start, its pending steps are cancelled,
  -- and its running steps get the cancel flag of job control (lib/control.lua): their
  -- workers stop them, and their release ends them cancelled. A step's report that
  -- still arrives finds the workflow ended and changes nothing.
  local function wf_abort(home, wid, wk)
    if redis.call('HGET', wk, 'state') ~= 'running' then return end
    local err = '{"reason":"cancelled","at":' .. string.format('%d', wf_now) .. '}'
    local parked = wf_stop_steps(wid, wk, true)
    wf_close(home, wid, wk, 'cancelled', '{"ok":false,"error":' .. err .. '}', err, parked)
  end

  local wf_target -- forward: member -> fire -> target -> member ...

  -- Start node x of the workflow with input v (JSON; nil: none, the first steps): enqueue
  -- its parked leaves, at most START_CHUNK per call so that no script runs long. The rest
  -- continues from a cursor (c<x>, with the input kept in i<x>): through an outbox entry
  -- ('R') when `continue` is set, or by the client's own calls right after a submit.
  local START_CHUNK = 500 -- durq.protocol.workflows.START_CHUNK
  local function wf_start(home, wid, wk, x, v, continue)
    local list = redis.call('HGET', wk, 'L' .. x)
    local leaves = list and wf_split(list, ',') or {x}
    local from = 1
    if #leaves > START_CHUNK then from = tonumber(redis.call('HGET', wk, 'c' .. x)) or 1 end
    local to = math.min(from + START_CHUNK - 1, #leaves)
    if from > to then return end
    local fields = {}
    for i = from, to do fields[#fields + 1] = 'p' .. leaves[i] end
    local specs = wf_hmget(wk, fields)
    local policy, taken = nil, {}
    for i = 1, #fields do
      local spec = specs[i]
      if spec then
        local leaf = leaves[from + i - 1]
        taken[#taken + 1] = fields[i]
        policy = policy or redis.call('HGET', wk, 'policy')
        local f = wf_split(spec, '\0')
        local payload = f[7] .. ((f[6] == '1' and v) or '') .. f[8]
        wf_enqueue(f[1], {wid .. '.' .. leaf, payload, tonumber(f[5]), tonumber(f[3]),
          tonumber(f[4]), f[2], wf_link(home, wid, leaf, policy)})
      end
    end
    if #taken > 0 then wf_hdel(wk, taken) end
    if to < #leaves then
      redis.call('HSET', wk, 'c' .. x, to + 1)
      if v then redis.call('HSET', wk, 'i' .. x, v) end
      if continue then
        outbox_push(WF_SELF, 'r:' .. wid .. '.' .. x .. ':' .. to,
          table.concat({'R', home, wid, x, '1'}, '\0'), wf_now)
      end
    elseif from > 1 then
      -- done: a late 'R' finds the cursor past the end (the field goes when it ends)
      redis.call('HSET', wk, 'c' .. x, #leaves + 1)
      redis.call('HDEL', wk, 'i' .. x)
    end
  end

  -- Continue starting node x (an 'R' order): with the input kept when it began.
  local function wf_resume(home, wid, x, continue)
    local wk = home .. 'wf:' .. wid
    if redis.call('HGET', wk, 'state') ~= 'running' then return end
    wf_start(home, wid, wk, x, redis.call('HGET', wk, 'i' .. x), continue)
  end

  -- Barrier b has no open member left: its target runs with the members' results, in
  -- order, as a JSON list; the results are consumed (they travel on in that input).
  local function wf_fire(home, wid, wk, b)
    local members = wf_split(redis.call('HGET', wk, 'B' .. b) or '', ',')
    local fields = {}
    for i = 1, #members do fields[i] = 'r' .. members[i] end
    local values = wf_hmget(wk, fields)
    for i = 1, #members do
      if not values[i] then values[i] = 'null' end
    end
    wf_hdel(wk, fields)
    wf_target(home, wid, wk, b, '[' .. table.concat(values, ',') .. ']')
  end

  -- Member n of barrier b completed with v: counted once, by leaving the open set; only
  -- then is its result recorded. Returns true when it was counted now (the caller checks
  -- whether the set is empty: once per barrier and batch, see wf_completed_many).
  local function wf_member(wk, b, n, v)
    if redis.call('SREM', wk .. ':o:' .. b, n) == 0 then return false end
    redis.call('HSETNX', wk, 'r' .. n, v)
    return true
  end

  local function wf_fire_if_done(home, wid, wk, b)
    if redis.call('SCARD', wk .. ':o:' .. b) == 0 then wf_fire(home, wid, wk, b) end
  end

  -- Apply target t (the field t<n>) of node n with value v.
  local function wf_apply(home, wid, wk, n, t, v)
    local kind, arg = string.sub(t, 1, 1), string.sub(t, 3)
    if kind == 'm' then
      if wf_member(wk, arg, n, v) then wf_fire_if_done(home, wid, wk, arg) end
    elseif kind == 's' then
      wf_start(home, wid, wk, arg, v, true)
    else
      wf_end(home, wid, wk, v)
    end
  end

  wf_target = function(home, wid, wk, n, v)
    local t = redis.call('HGET', wk, 't' .. n)
    if t then wf_apply(home, wid, wk, n, t, v) end -- none: the workflow ended, or is unknown
  end

  -- Nodes of workflow wid (at home, in this slot) completed: items {node, value, waited}.
  -- One HMGET for their targets; members of one barrier are counted one by one (SREM,
  -- then HSETNX) and the barrier checked once.
  local function wf_completed_many(home, wid, items)
    local wk = home .. 'wf:' .. wid
    local fields, waited = {}, {}
    for i = 1, #items do
      fields[i] = 't' .. items[i][1]
      if items[i][3] then waited[#waited + 1] = 'w' .. items[i][1] end
    end
    if #waited > 0 then wf_hdel(wk, waited) end
    local targets = wf_hmget(wk, fields)
    local touched, order = {}, {}
    for i = 1, #items do
      local t, n, v = targets[i], items[i][1], items[i][2]
      if t and string.sub(t, 1, 1) == 'm' then
        local b = string.sub(t, 3)
        if wf_member(wk, b, n, v) and not touched[b] then
          touched[b] = true
          order[#order + 1] = b
        end
      elseif t then
        wf_apply(home, wid, wk, n, t, v)
      end
    end
    for i = 1, #order do wf_fire_if_done(home, wid, wk, order[i]) end
  end

  -- Node n of workflow wid (at home, in this slot) completed with result v (JSON).
  local function wf_completed(home, wid, n, v, waited)
    wf_completed_many(home, wid, {{n, v, waited}})
  end

  -- Whether a dead step can still be replayed: not when it was cancelled or expired, nor
  -- once its dead letter is gone (purged, or evicted by dead_cap: lib/fan_in_dead.lua
  -- fan_in_gone, whose reason begins with its own "reason" and nests the death's).
  local function wf_replayable(reason)
    local head = string.sub(reason, 1, 19)
    if head == '{"reason":"purged",' or head == '{"reason":"evicted"' then return false end
    return not (string.find(reason, '"reason":"cancelled"', 1, true)
      or string.find(reason, '"reason":"expired"', 1, true))
  end

  -- Node n died with reason (JSON): the workflow's policy decides.
  local function wf_died(home, wid, n, reason)
    local wk = home .. 'wf:' .. wid
    local st = redis.call('HMGET', wk, 'state', 'policy')
    if st[1] ~= 'running' then return end
    if st[2] == 'ignore' then
      wf_target(home, wid, wk, n, '{"durq_error":' .. reason .. '}')
    elseif st[2] == 'wait' and wf_replayable(reason) then
      -- a dead step can be replayed; one that cannot any more fails the workflow
      redis.call('HSET', wk, 'w' .. n, reason)
    else
      wf_fail(home, wid, wk, n, reason)
    end
  end

  -- The value a worker reported for a step (durq.message.encode_result's JSON): the value,
  -- or the error marker when the result could not be stored.
  local function wf_value(raw)
    if string.sub(raw, 1, 19) == '{"ok":true,"value":' then return string.sub(raw, 20, -2) end
    if string.sub(raw, 1, 20) == '{"ok":false,"error":' then
      return '{"durq_error":' .. string.sub(raw, 21, -2) .. '}'
    end
    return 'null'
  end

  -- release.lua, inside the fenced release: steps released by the holder of their lease,
  -- {id, token, link, result} each. The links go; the completions are applied here, per
  -- workflow, when its home shares this slot, else they leave through this queue's outbox.
  local function wf_released(done, now)
    if #done == 0 then return end
    wf_now = now
    local ids = {}
    for i = 1, #done do ids[i] = done[i][1] end
    wf_hdel(K_PREFIX .. WF_LINKS, ids)
    local by_wf, order = {}, {}
    for i = 1, #done do
      local id, token, link, raw = done[i][1], done[i][2], done[i][3], done[i][4]
      local home, wid, node, policy = wf_parse_link(link)
      if home then
        local v = wf_value(raw)
        if wf_tag(home) == WF_SLOT then
          local key = home .. '\t' .. wid
          local list = by_wf[key]
          if not list then
            list = {home, wid, {}}
            by_wf[key] = list
            order[#order + 1] = key
          end
          list[3][#list[3] + 1] = {node, v, policy == 'wait'}
        else
          outbox_push(K_PREFIX, 'c:' .. id .. ':' .. token,
            table.concat({'C', home, wid, node, policy, v}, '\0'), now)
        end
      end
    end
    for i = 1, #order do
      local w = by_wf[order[i]]
      wf_completed_many(w[1], w[2], w[3])
    end
  end

  local function wf_reset_helpers()
    counts, ready_delta, ready_groups = {}, {}, {}
    touched, touched_list, need_wake = {}, {}, false
    earliest_due, conf_cache = nil, nil
    control_fns = nil -- lib/control names its keys from the prefix when it is built
  end

  -- Cancel a step of workflow wid in the queue K_* name: only while it is linked (not
  -- finished). A step that did not start (pending, delayed, backing off) ends cancelled,
  -- as cancel.lua ends such a job: state, reason (by the workflow), counter `cancelled`,
  -- a listed id skipped when dequeue reaches it; under policy "fail" (not `stop`) it also
  -- counts in wf_steps_cancelled. Its link goes first, so its end does not report to the
  -- workflow, and a cancel applied again finds nothing to do. A running step: under
  -- "fail" it finishes, and its release reports to the ended workflow, which ignores
  -- it; with `stop` (the workflow was cancelled) it is flagged as cancel.lua flags it: its
  -- worker stops it and its release ends it cancelled. A step not enqueued yet (its start
  -- is still in an outbox) gets a tombstone, so that the start skips it.
  local function wf_cancel_one(wid, id, now, stop)
    local lk = K_PREFIX .. WF_LINKS
    if redis.call('HEXISTS', lk, id) == 0 then
      if redis.call('HEXISTS', K_JOBS, id) == 0 then
        redis.call('ZADD', K_DONE, 'NX', now + get_conf().dedup_window, id)
      end
      return
    end
    local r = rec_decode(redis.call('HGET', K_JOBS, id))
    if r and r.state == ST_ACTIVE then
      if stop and bit.band(r.flags, FLAG_CANCEL) == 0 then
        r.flags = bit.bor(r.flags, FLAG_CANCEL)
        redis.call('HSET', K_JOBS, id, rec_encode(r))
        -- a hint only, as in cancel.lua: the flag is the truth
        redis.pcall('PUBLISH', K_PREFIX .. 'cancel', id)
      end
      return
    end
    redis.call('HDEL', lk, id)
    if not r or (r.state ~= ST_PENDING and r.state ~= ST_DELAYED) then return end
    local listed = false
    if r.state == ST_DELAYED then
      redis.call('ZREM', K_DELAYED, id)
    elseif r.prio ~= 0 then
      redis.pcall('ZREM', ready_prio(r.group), id)
      ready_add(r.group, -1)
    else
      listed = true
      ready_add(r.group, -1)
    end
    local message = 'its workflow was cancelled'
    if not stop then
      message = 'its workflow failed'
      count('wf_steps_cancelled', 1)
    end
    control().end_unstarted(id, r, now, ST_CANCELLED, nil, listed,
      {by = 'workflow ' .. wid, message = message})
  end

  -- Enqueue steps without delay or priority into the queue K_* name, linked to their
  -- workflow: a few commands per batch (as enqueue_plain.lua does), not per step. An id
  -- that exists or is still taken (tombstone) is a start applied before: skipped.
  local function wf_push_plain(now, items)
    if #items == 0 then return end
    local ids = {}
    for i = 1, #items do ids[i] = items[i][1] end
    local recs = wf_hmget(K_JOBS, ids)
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
    'reasons', 'stats'}

  -- Apply what the engine decided: enqueue the steps started in this slot (and link them),
  -- cancel, and push outbox entries for the other slots. Call last: it rebinds K_*.
  local function wf_flush()
    if #wf_local_order + #wf_stops_order + #wf_remote_order == 0 then return end
    local now = wf_now or now_ms()
    for _, prefix in ipairs(wf_local_order) do
      bind_prefix(prefix)
      wf_reset_helpers()
      local items = wf_local[prefix]
      local problem = keys_error(WF_QUEUE_PARTS)
      for i = 1, #items do
        problem = problem or group_error(items[i][6])
      end
      if problem then
        -- never a half-applied step: the outbox retries it until the keys are repaired
        local list = wf_remote[prefix]
        if not list then
          list = {}
          wf_remote[prefix] = list
          wf_remote_order[#wf_remote_order + 1] = prefix
        end
        for i = 1, #items do list[#list + 1] = items[i] end
      else
        local plain = {}
        for i = 1, #items do
          local it = items[i]
          if it[3] == 0 and it[4] == 0 then
            plain[#plain + 1] = it
          else
            local status = enqueue_one(now, it[1], it[2], it[3], it[4], it[5], JSON_CODEC, it[6],
              '', '0')
            if status == S_CREATED then redis.call('HSET', prefix .. WF_LINKS, it[1], it[7]) end
          end
        end
        wf_push_plain(now, plain)
        offer_touched()
        flush_counters()
        wake_if_needed()
      end
    end
    for _, mk in ipairs(wf_stops_order) do
      local items = wf_stops[mk]
      local kind, prefix = string.sub(mk, 1, 1), string.sub(mk, 2)
      local here = wf_tag(prefix) == WF_SLOT
      if here then
        bind_prefix(prefix)
        wf_reset_helpers()
        here = not keys_error(WF_QUEUE_PARTS) -- else the outbox retries it until repaired
      end
      if here then
        for i = 1, #items do wf_cancel_one(items[i][1], items[i][2], now, items[i][3]) end
        flush_counters()
      else
        for c = 1, #items, 1000 do
          local parts = {kind, prefix, items[c][1]}
          for i = c, math.min(c + 999, #items) do parts[#parts + 1] = items[i][2] end
          outbox_push(WF_SELF, string.lower(kind) .. ':' .. items[c][2], table.concat(parts, '\0'),
            now)
        end
      end
    end
    for _, prefix in ipairs(wf_remote_order) do
      local items = wf_remote[prefix]
      for c = 1, #items, 500 do
        local parts = {'S', prefix}
        for i = c, math.min(c + 499, #items) do
          local it = items[i]
          parts[#parts + 1] = table.concat({it[1], it[6], it[4], it[5], it[3], it[7], it[2]}, '\0')
        end
        outbox_push(WF_SELF, 's:' .. items[c][1], table.concat(parts, '\0'), now)
      end
    end
    wf_local, wf_local_order, wf_remote, wf_remote_order = {}, {}, {}, {}
    wf_stops, wf_stops_order = {}, {}
  end

  return {
    released = wf_released, flush = wf_flush, completed = wf_completed, died = wf_died,
    resume = wf_resume, enqueue = wf_enqueue, cancel = wf_cancel, start = wf_start,
    abort = function(home, wid) wf_abort(home, wid, home .. 'wf:' .. wid) end,
    set_now = function(now) wf_now = now end,
  }
end

--- @per-call (reset at the start of every call: lua/functions.py)
local WF = nil
--- @end
local function wf_engine()
  WF = WF or wf_build()
  return WF
end

-- release.lua: the links of the jobs being released (nil: this queue has no workflow
-- steps, which costs one EXISTS).
local function fan_in_links(ids)
  if #ids == 0 or redis.call('EXISTS', K_PREFIX .. WF_LINKS) == 0 then return nil end
  return redis.call('HMGET', K_PREFIX .. WF_LINKS, unpack(ids))
end

-- release.lua, inside the fenced release: steps released by the holder of their lease,
-- {id, token, link, result} each (see wf_released).
local function fan_in_released(done, now)
  if #done > 0 then wf_engine().released(done, now) end
end

-- Apply what the engine decided (steps to enqueue or cancel in this slot, outbox
-- entries for others). Call last: it rebinds K_*.
local function fan_in_flush()
  if WF then WF.flush() end
end
