--- @include "lib/core/keys"
--- @include "lib/core/bind_prefix"
--- @include "lib/core/clock"
--- @include "lib/core/conf"
--- @include "lib/core/record"
--- @include "lib/core/counters"
--- @include "lib/groups/slots"
--- @include "lib/groups/offer"
--- @include "lib/control/job_control"
--- @include "lib/core/delayed"
--- @include "lib/core/reason"
--- @include "lib/core/types"
--- @include "lib/core/enqueue_one"
--- @include "lib/core/outbox"
--- @include "lib/workflows/link"
--- @include "lib/workflows/seq"
--- @include "lib/workflows/stop"
--- @include "lib/workflows/steps"
--- @include "lib/workflows/fan_in_stop"
--- @include "lib/workflows/legacy"

-- Workflows (durq.app.workflows): the fan-in engine. A workflow lives in its home queue's
-- slot. Each submission draws a run tag (fixed length); its steps' job ids are
-- "<wid>.<run>.<node>" (the "sid" below is "<wid>.<run>"). Keys, under the home prefix:
--   wf:<wid>         hash: the header: state, policy, run, created, finished, ttl, plan
--                    (JSON, for status), error; once ended, the summary (with a TTL)
--   wfs:<run>:<wid>  hash: the structure of that run:
--     t<n>  the target of node n: "m:<b>" member of barrier b | "s:<x>" start node x | "e"
--     L<x>  the leaves that starting node x starts (comma separated, in parts of 100:
--           L<x>, L<x>:2... ; absent: x itself)
--     B<b>  the members of barrier b, in order (in parts too); N<b> how many are open
--     p<n>  the parked spec of leaf n, not started yet: NUL-separated queue prefix, group,
--           priority, max attempts, delay ms, mutable ('1': the input goes first),
--           payload head and tail (the input is spliced between them), expiry ('',
--           'in:<ms after its start>' or 'at:<epoch ms>')
--     L0    the first steps; c<x>, i<x>  where starting node x continues (a cursor
--           "<part>:<byte>", or "end") and its input (large starts)
--     r<n>  the result (JSON) of member n until its barrier fires; a<b> where the
--           gathering of barrier b's results continues (large groups), F the barriers
--           being gathered (their partial lists are in wfa:<run>:<b>:<wid>, strings)
--     w<n>  the reason of a dead member waited for (policy "wait")
--     Q<k>, Q, P  the steps by queue, in chunks, to stop them (lib/workflows/fan_in_stop.lua)
--     s<prefix>   the numbered 'S' entries sent to that queue (lib/workflows/seq.lua)
--     q<prefix>   the number of the 'Q' entry that consumes them, once it stops
--     stop, x     while stopping: 'X' (failed) or 'K' (cancelled), and the next chunk
--   wfd:<run>:<wid>  set: the nodes whose completion counted
--   wfr              zset: the running workflows, by start time
-- A completion counts by membership: SADD to the done set, and only when that added it
-- is the result recorded and its barrier's open count lowered; the barrier fires when
-- the count reaches 0 (its target runs with the members' results as a JSON list, in
-- order). A start consumes the parked specs (a start applied twice finds none). So every
-- step is idempotent, and completions delivered twice (a step run twice, an outbox
-- entry delivered again) count once. A report for another run (an older submission of
-- the same id) finds another run in the header and changes nothing.
-- No call does work that grows with the workflow: a start enqueues at most START_CHUNK
-- steps, a fire gathers at most FIRE_CHUNK results, a stop ends about 50 steps (chunked
-- by the client at submit); each continues through the home queue's outbox ('R', 'F',
-- 'E' entries), from a cursor in the structure. Steps started in this slot are enqueued
-- at the end (fan_in_flush, lib/workflows/steps.lua); steps and completions for another slot
-- leave through the outbox of the script's own queue, starts numbered (lib/workflows/seq.lua).
-- A workflow durq 0.1.0 submitted has no run: it runs on in 0.1.0's layout, as the run ''
-- (lib/workflows/legacy.lua).

-- The engine is built on first use: its closures cost nothing to the releases of a queue
-- that has no workflow steps (Lua re-creates every function of a script on each call).
local function wf_build()
  local WF_SELF = KEYS[1]                       -- the prefix of the script's own queue
  local WF_SLOT = string.match(KEYS[1], '{(.-)}')
  local START_CHUNK = 100 -- durq.protocol.workflows.START_CHUNK
  local FIRE_CHUNK = 500 -- durq.protocol.workflows.FIRE_CHUNK (results per call)
  local CHUNK_BYTES = 262144 -- payload bytes started, result bytes gathered, per call

  local E = {now = nil} -- what lib/workflows/fan_in_stop.lua shares (filled in below)
  -- lib/workflows/steps.lua, lib/workflows/fan_in_stop.lua: made on use
  local wf_queue, wf_stops_run, wf_legacy = nil, nil, nil
  local fire_left = FIRE_CHUNK                  -- results this call may still gather
  local wf_local, wf_local_order = {}, {}       -- prefix -> steps to enqueue in this slot
  local wf_remote, wf_remote_order = {}, {}     -- prefix + run -> steps for another slot
  local wf_stops, wf_stops_order = {}, {}       -- kind + prefix -> steps to cancel there

  local function wf_tag(prefix)
    return string.match(prefix, '{(.-)}')
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

  -- Long lists of the structure (L<x>, B<b>) are stored in parts of 100 items: field
  -- `name`, then `name:2`, `name:3`... A cursor {k, pos} points at byte pos of part k.
  -- The next items of list `name` (at most n) from the cursor, the cursor after each,
  -- and whether more follow the last.
  local function wf_list_next(key, name, k, pos, n)
    local items, after = {}, {}
    local part = redis.call('HGET', key, k == 1 and name or (name .. ':' .. k))
    while part and #items < n do
      if pos > #part then
        k, pos = k + 1, 1
        part = redis.call('HGET', key, name .. ':' .. k)
      else
        local comma = string.find(part, ',', pos, true)
        local stop = comma and comma - 1 or #part
        items[#items + 1] = string.sub(part, pos, stop)
        pos = stop + 2
        after[#after + 1] = {k, pos}
      end
    end
    local more = part and (pos <= #part
      or redis.call('HEXISTS', key, name .. ':' .. (k + 1)) == 1)
    return items, after, more and true or false
  end

  -- A cursor as stored ("k:pos"), and back ({1, 1} for none).
  local function wf_cursor(raw)
    local k, pos = string.match(raw or '', '^(%d+):(%d+)$')
    if not k then return 1, 1 end
    return tonumber(k), tonumber(pos)
  end

  -- A workflow's run: its keys and step ids. The run '' is a workflow of durq 0.1.0
  -- (lib/workflows/legacy.lua): one hash, step ids without the run, no done set.
  local function wf_ctx(home, wid, run)
    local wk = home .. 'wf:' .. wid
    if run == '' then
      return {home = home, wid = wid, run = run, sid = wid, wk = wk, ws = wk, legacy = true}
    end
    return {home = home, wid = wid, run = run, sid = wid .. '.' .. run,
      wk = wk, ws = home .. 'wfs:' .. run .. ':' .. wid,
      wd = home .. 'wfd:' .. run .. ':' .. wid}
  end

  -- Run `run` of workflow wid (at home, in this slot) and its state: nil when the
  -- workflow is unknown, expired, or another run of the same id.
  local function wf_open(home, wid, run)
    local h = redis.call('HMGET', home .. 'wf:' .. wid, 'state', 'run', 'policy')
    if not h[1] or (h[2] or '') ~= run then return nil end
    local w = wf_ctx(home, wid, run)
    w.policy = h[3] or 'fail'
    return w, h[1]
  end

  -- Steps of run w to start in queue `prefix` of another slot (or of this one, once its
  -- keys turned out broken): numbered 'S' entries will carry them (wf_send_starts).
  local function wf_send_later(prefix, item, w)
    local key = prefix .. '\0' .. w.ws
    local bucket = wf_remote[key]
    if not bucket then
      bucket = {prefix, w, {}}
      wf_remote[key] = bucket
      wf_remote_order[#wf_remote_order + 1] = key
    end
    bucket[3][#bucket[3] + 1] = item
  end

  -- item = {id, payload, delay_ms, priority, max_attempts, group, link, expiry, run w}
  local function wf_enqueue(prefix, item, w)
    if wf_tag(prefix) ~= WF_SLOT then return wf_send_later(prefix, item, w) end
    local list = wf_local[prefix]
    if not list then
      list = {}
      wf_local[prefix] = list
      wf_local_order[#wf_local_order + 1] = prefix
    end
    item[9] = w
    list[#list + 1] = item
  end

  -- Step `id` of workflow wid in queue prefix is to stop: kind 'X' (its workflow
  -- failed) or 'K' (cancelled: a running step is flagged to stop too).
  local function wf_stops_of(kind, prefix)
    local mk = kind .. prefix
    local bucket = wf_stops[mk]
    if not bucket then
      bucket = {kind = kind, prefix = prefix, items = {}, clear = {}}
      wf_stops[mk] = bucket
      wf_stops_order[#wf_stops_order + 1] = mk
    end
    return bucket
  end

  E.hmget, E.hdel, E.stops_of, E.self = wf_hmget, wf_hdel, wf_stops_of, WF_SELF
  E.enqueue = wf_enqueue
  E.here = function(prefix) return wf_tag(prefix) == WF_SLOT end

  local function wf_q()
    wf_queue = wf_queue or wf_queue_build(wf_hmget)
    return wf_queue
  end

  local function wf_stopper()
    wf_stops_run = wf_stops_run or wf_stop_build(E)
    return wf_stops_run
  end

  local function wf_old()
    wf_legacy = wf_legacy or wf_legacy_build(E)
    return wf_legacy
  end

  -- The run ended: its result is stored like a job's (<home>result:<wid>, a one-element
  -- list, so waiters block on it), the header becomes its summary; both are kept ttl.
  local function wf_close(w, state, raw, err)
    local ttl = tonumber(redis.call('HGET', w.wk, 'ttl')) or 3600000
    redis.call('HSET', w.wk, 'state', state, 'finished', E.now)
    if err then redis.call('HSET', w.wk, 'error', err) end
    redis.call('PEXPIRE', w.wk, ttl)
    local rk = w.home .. 'result:' .. w.wid
    redis.call('DEL', rk)
    redis.call('RPUSH', rk, raw)
    redis.call('PEXPIRE', rk, ttl)
    redis.call('ZREM', w.home .. 'wfr', w.wid)
    redis.pcall('HINCRBY', w.home .. 'stats', 'wf_' .. state, 1)
    return ttl
  end

  local function wf_end(w, v)
    wf_close(w, 'completed', '{"ok":true,"value":' .. v .. '}', nil)
    if w.legacy then
      wf_old().clear(w, nil)
    else
      redis.call('UNLINK', w.ws, w.wd) -- O(1) here: large values are freed aside
    end
    w.ended = true
  end

  -- Run w ends early with `state` (failed: kind 'X'; cancelled: 'K'): its steps stop.
  local function wf_end_early(w, state, kind, err)
    local parked = w.legacy and wf_old().stop(w, kind)
    local ttl = wf_close(w, state, '{"ok":false,"error":' .. err .. '}', err)
    if w.legacy then
      wf_old().clear(w, parked)
    else
      wf_stopper().begin(w, kind, ttl)
    end
    w.ended = true
  end

  -- Policy "fail": the run ends failed with the reason; its steps stop (a running one
  -- finishes, and its completion finds the run ended).
  local function wf_fail(w, n, reason)
    local err = '{"reason":"child_failed","step":' .. n .. ',"job":'
      .. cjson.encode(w.sid .. '.' .. n) .. ',"error":' .. reason .. '}'
    wf_end_early(w, 'failed', 'X', err)
  end

  -- workflow_cancel.lua: the running workflow wid (at home, in this slot) ends
  -- cancelled; its steps stop, and its running steps get the cancel flag of job control
  -- (lib/control/job_control.lua): their workers stop them, their release ends them cancelled.
  local function wf_abort(home, wid)
    local h = redis.call('HMGET', home .. 'wf:' .. wid, 'state', 'run')
    if h[1] ~= 'running' then return end
    local w = wf_ctx(home, wid, h[2] or '')
    local err = '{"reason":"cancelled","at":' .. string.format('%d', E.now) .. '}'
    wf_end_early(w, 'cancelled', 'K', err)
  end

  local wf_completed_many -- forward: member -> fire -> target -> member ...

  -- Start node x of the run with input v (JSON; nil: none, the first steps): enqueue its
  -- parked leaves, at most START_CHUNK (and CHUNK_BYTES of payload) per call. The rest
  -- continues from a cursor (c<x>, with the input kept in i<x>): through an outbox entry
  -- ('R') when `continue` is set, or by the client's own calls right after a submit.
  local function wf_start(w, x, v, continue)
    if w.legacy then return wf_old().start(w, x, v, continue) end -- lib/workflows/legacy.lua
    local listed = redis.call('HEXISTS', w.ws, 'L' .. x) == 1
    local leaves, after, more = {x}, {{1, 1}}, false
    local at = '1:1'
    if listed then
      at = redis.call('HGET', w.ws, 'c' .. x) or at
      if at == 'end' then return end
      local k, pos = wf_cursor(at)
      leaves, after, more = wf_list_next(w.ws, 'L' .. x, k, pos, START_CHUNK)
    end
    local fields = {}
    for i = 1, #leaves do fields[i] = 'p' .. leaves[i] end
    local specs = #fields > 0 and wf_hmget(w.ws, fields) or {}
    local taken, bytes, nxt = {}, 0, nil
    for i = 1, #fields do
      local spec = specs[i]
      if spec then
        local f = wf_split(spec, '\0')
        local payload = f[7] .. ((f[6] == '1' and v) or '') .. f[8]
        if #taken > 0 and bytes + #payload > CHUNK_BYTES then
          more = true
          break
        end
        bytes = bytes + #payload
        taken[#taken + 1] = fields[i]
        wf_enqueue(f[1], {w.sid .. '.' .. leaves[i], payload, tonumber(f[5]), tonumber(f[3]),
          tonumber(f[4]), f[2], wf_link(w.home, w.wid, leaves[i], w.policy, w.run), f[9] or ''},
          w)
      end
      nxt = after[i]
    end
    if #taken > 0 then wf_hdel(w.ws, taken) end
    if not listed then return end
    if more then
      redis.call('HSET', w.ws, 'c' .. x, nxt[1] .. ':' .. nxt[2])
      if v and at == '1:1' then redis.call('HSET', w.ws, 'i' .. x, v) end
      if continue then
        outbox_push(w.home, 'r:' .. w.sid .. '.' .. x .. ':' .. at,
          table.concat({'R', w.home, w.wid, x, '1', w.run}, '\0'), E.now)
      end
    elseif at ~= '1:1' then
      -- done: a late 'R' finds the cursor at the end (the field goes with the run)
      redis.call('HSET', w.ws, 'c' .. x, 'end')
      redis.call('HDEL', w.ws, 'i' .. x)
    end
  end

  -- Barrier b has no open member left: its target runs with the members' results, in
  -- order, as a JSON list; the results are consumed (they travel on in that input). At
  -- most FIRE_CHUNK results (CHUNK_BYTES) are gathered per call: a larger list is built
  -- up in a string over calls ('F' entries), then used. `first`: called by the count
  -- that reached 0 (else by an 'F' entry, which finds a<b> unless it is done).
  local function wf_fire(w, b, first)
    if w.legacy then -- in one call, as 0.1.0 (lib/workflows/legacy.lua)
      local t = redis.call('HGET', w.wk, 't' .. b)
      local v = wf_old().gather(w, b)
      if t then wf_completed_many(w, {{b, v, false}}, {t}) end
      return
    end
    local ak = w.home .. 'wfa:' .. w.run .. ':' .. b .. ':' .. w.wid
    local at = '1:1'
    if not first then
      at = redis.call('HGET', w.ws, 'a' .. b)
      if not at then return end
    end
    local k, pos = wf_cursor(at)
    local parts, bytes, taken, more, full = {}, 0, {}, true, false
    while more and not full and fire_left > 0 do
      local members, after
      members, after, more = wf_list_next(w.ws, 'B' .. b, k, pos, math.min(20, fire_left))
      if #members == 0 then break end
      local fields = {}
      for i = 1, #members do fields[i] = 'r' .. members[i] end
      local values = redis.call('HMGET', w.ws, unpack(fields))
      for i = 1, #members do
        local value = values[i] or 'null'
        if #parts > 0 and bytes + #value > CHUNK_BYTES then
          full, more = true, true -- this one and the rest: in the next call
          break
        end
        parts[#parts + 1] = value
        bytes = bytes + #value
        taken[#taken + 1] = fields[i]
        fire_left = fire_left - 1
        k, pos = after[i][1], after[i][2]
      end
    end
    wf_hdel(w.ws, taken)
    local part = table.concat(parts, ',')
    if more then
      -- more to gather (or this call gathered enough already): keep this part, continue
      -- in a call of its own
      if part ~= '' then redis.call('APPEND', ak, (at ~= '1:1' and ',' or '') .. part) end
      local nxt = k .. ':' .. pos
      redis.call('HSET', w.ws, 'a' .. b, nxt)
      if first then
        local firing = redis.call('HGET', w.ws, 'F')
        redis.call('HSET', w.ws, 'F', firing and (firing .. ',' .. b) or b)
      end
      outbox_push(w.home, 'f:' .. w.sid .. '.' .. b .. ':' .. nxt,
        table.concat({'F', w.home, w.wid, w.run, b}, '\0'), E.now)
      return
    end
    local v = '[' .. part .. ']'
    if not first then
      local acc = redis.call('GET', ak) or ''
      if acc ~= '' then v = '[' .. acc .. (part ~= '' and ',' or '') .. part .. ']' end
      redis.call('UNLINK', ak)
      redis.call('HDEL', w.ws, 'a' .. b)
    end
    local t = redis.call('HGET', w.ws, 't' .. b)
    if t then wf_completed_many(w, {{b, v, false}}, {t}) end
  end

  -- Nodes of running run w completed: items {node, value, waited}, `targets` their t<n>
  -- (nil: read here). Each counts once, by membership in the done set; the members of
  -- one barrier lower its open count once per call.
  wf_completed_many = function(w, items, targets)
    if not targets then
      local fields, waited = {}, {}
      for i = 1, #items do
        fields[i] = 't' .. items[i][1]
        if items[i][3] then waited[#waited + 1] = 'w' .. items[i][1] end
      end
      if #waited > 0 then wf_hdel(w.ws, waited) end
      targets = wf_hmget(w.ws, fields)
    end
    local lowered, order = {}, {}
    for i = 1, #items do
      local t, n, v = targets[i], items[i][1], items[i][2]
      if w.ended then return end
      if t and (w.legacy or redis.call('SADD', w.wd, n) == 1) then
        local kind, arg = string.sub(t, 1, 1), string.sub(t, 3)
        if kind == 'm' and w.legacy then
          if wf_old().member(w, arg, n, v) and not lowered[arg] then
            lowered[arg] = 0
            order[#order + 1] = arg
          end
        elseif kind == 'm' then
          redis.call('HSET', w.ws, 'r' .. n, v)
          if not lowered[arg] then
            lowered[arg] = 0
            order[#order + 1] = arg
          end
          lowered[arg] = lowered[arg] + 1
        elseif kind == 's' then
          wf_start(w, arg, v, true)
        else
          wf_end(w, v)
        end
      end
    end
    for i = 1, #order do
      local b = order[i]
      if w.ended then return end
      if w.legacy then
        if wf_old().all_counted(w, b) then wf_fire(w, b, true) end
      elseif redis.call('HINCRBY', w.ws, 'N' .. b, -lowered[b]) <= 0 then
        wf_fire(w, b, true)
      end
    end
  end

  -- Completions of run `run` of workflow wid (at home, in this slot): counted while it
  -- runs; once it ended early, only noted for status() (a step running at its end
  -- finishes); ignored for another run.
  local function wf_completed(home, wid, run, items)
    local w, state = wf_open(home, wid, run)
    if not w then return end
    if state == 'running' then
      wf_completed_many(w, items)
    elseif w.wd and redis.call('EXISTS', w.wd) == 1 then -- the summary's: it has its TTL
      for i = 1, #items do redis.call('SADD', w.wd, items[i][1]) end
    end
  end

  -- Whether a dead step can still be replayed: not when it was cancelled or expired, nor
  -- once its dead letter is gone (purged, or evicted by dead_cap: lib/workflows/fan_in_dead.lua
  -- fan_in_gone, whose reason begins with its own "reason" and nests the death's).
  local function wf_replayable(reason)
    local head = string.sub(reason, 1, 19)
    if head == '{"reason":"purged",' or head == '{"reason":"evicted"' then return false end
    return not (string.find(reason, '"reason":"cancelled"', 1, true)
      or string.find(reason, '"reason":"expired"', 1, true))
  end

  -- Node n of run `run` died with reason (JSON): the workflow's policy decides.
  local function wf_died(home, wid, run, n, reason)
    local w, state = wf_open(home, wid, run)
    if not w or state ~= 'running' then return end
    if w.policy == 'ignore' then
      wf_completed_many(w, {{n, '{"durq_error":' .. reason .. '}', false}})
    elseif w.policy == 'wait' and wf_replayable(reason) then
      -- a dead step can be replayed; one that cannot any more fails the workflow
      redis.call('HSET', w.ws, 'w' .. n, reason)
    else
      wf_fail(w, n, reason)
    end
  end

  -- The value a worker reported for a step (durq.payloads.encode_result's JSON): the value,
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
  -- run, when its home shares this slot, else they leave through this queue's outbox.
  local function wf_released(done, now)
    if #done == 0 then return end
    E.now = now
    local ids = {}
    for i = 1, #done do ids[i] = done[i][1] end
    wf_hdel(K_PREFIX .. WF_LINKS, ids)
    local by_run, order = {}, {}
    for i = 1, #done do
      local id, token, link, raw = done[i][1], done[i][2], done[i][3], done[i][4]
      local home, wid, node, policy, run = wf_parse_link(link)
      if home then
        local v = wf_value(raw)
        if wf_tag(home) == WF_SLOT then
          local key = home .. '\t' .. wid .. '\t' .. run
          local list = by_run[key]
          if not list then
            list = {home, wid, run, {}}
            by_run[key] = list
            order[#order + 1] = key
          end
          list[4][#list[4] + 1] = {node, v, policy == 'wait'}
        else
          outbox_push(K_PREFIX, 'c:' .. id .. ':' .. token,
            table.concat({'C', home, wid, node, policy, v, run}, '\0'), now)
        end
      end
    end
    for i = 1, #order do
      local r = by_run[order[i]]
      wf_completed(r[1], r[2], r[3], r[4])
    end
  end

  -- The numbered 'S' entries that start `items` of run w in queue `prefix` (lib/workflows/seq.lua),
  -- sent from this queue's outbox; the run notes their numbers, so that stopping it
  -- consumes those still on their way.
  local function wf_send_starts(prefix, w, items)
    if w.legacy then return wf_old().send_starts(prefix, items) end
    local sent = {}
    for c = 1, #items, START_CHUNK do
      local seq = wf_seq_next(WF_SELF, prefix)
      local parts = {'S', prefix, WF_SELF, seq}
      for i = c, math.min(c + START_CHUNK - 1, #items) do
        local it = items[i]
        parts[#parts + 1] = table.concat({it[1], it[6], it[4], it[5], it[3], it[8], it[7], it[2]},
          '\0')
      end
      outbox_push(WF_SELF, 's:' .. items[c][1], table.concat(parts, '\0'), E.now or now_ms())
      sent[#sent + 1] = WF_SELF .. '\t' .. seq
    end
    local field = 's' .. prefix
    local before = redis.call('HGET', w.ws, field)
    redis.call('HSET', w.ws, field, (before and (before .. ',') or '') .. table.concat(sent, ','))
  end

  -- Apply what the engine decided: enqueue the steps started in this slot (and link them),
  -- stop steps, and push outbox entries for the other slots. Call last: it rebinds K_*.
  local function wf_flush()
    if #wf_local_order + #wf_stops_order + #wf_remote_order == 0 then return end
    local now = E.now or now_ms()
    for _, prefix in ipairs(wf_local_order) do
      bind_prefix(prefix)
      wf_q().reset()
      local items = wf_local[prefix]
      if wf_q().problem(items) then
        -- never a half-applied step: the outbox retries it until the keys are repaired
        for i = 1, #items do wf_send_later(prefix, items[i], items[i][9]) end
      else
        wf_q().enqueue(now, items)
        offer_touched()
        flush_counters()
        wake_if_needed()
      end
    end
    for _, mk in ipairs(wf_stops_order) do
      local b = wf_stops[mk]
      local here = wf_tag(b.prefix) == WF_SLOT
      if here then
        bind_prefix(b.prefix)
        wf_q().reset()
        here = not keys_error(wf_q().parts) -- else the outbox retries it until repaired
      end
      if here then
        for i = 1, #b.items do wf_q().stop_one(b.items[i][1], b.items[i][2], now, b.kind) end
        for i = 1, #b.clear do redis.call('HDEL', K_PREFIX .. WF_GUARDS, b.clear[i]) end
        -- a step backing off gave its group's slot back: offer the group, wake a worker
        offer_touched()
        flush_counters()
        wake_if_needed()
      elseif #b.items > 0 then
        local parts = {b.kind, b.prefix, b.items[1][1], b.sender or '', b.q or ''}
        if b.legacy then parts = {b.kind, b.prefix, b.items[1][1]} end -- 0.1.0's layout
        for i = 1, #b.items do parts[#parts + 1] = b.items[i][2] end
        outbox_push(WF_SELF, string.lower(b.kind) .. ':' .. b.items[1][2],
          table.concat(parts, '\0'), now)
      end
    end
    for _, key in ipairs(wf_remote_order) do
      local bucket = wf_remote[key]
      wf_send_starts(bucket[1], bucket[2], bucket[3])
    end
    wf_local, wf_local_order, wf_remote, wf_remote_order = {}, {}, {}, {}
    wf_stops, wf_stops_order = {}, {}
  end

  return {
    released = wf_released, flush = wf_flush, completed = wf_completed, died = wf_died,
    abort = wf_abort, enqueue_here = function(now, items) wf_q().enqueue(now, items) end,
    start_problem = function(items) return wf_q().problem(items) end,
    open = wf_open, ctx = wf_ctx, start = wf_start,
    resume = function(home, wid, run, x, continue)
      local w, state = wf_open(home, wid, run)
      if w and state == 'running' then
        wf_start(w, x, redis.call('HGET', w.ws, 'i' .. x), continue)
      end
    end,
    fire = function(home, wid, run, b)
      local w, state = wf_open(home, wid, run)
      if w and state == 'running' then wf_fire(w, b, false) end
    end,
    stop_next = function(home, wid, run) wf_stopper().next(wf_ctx(home, wid, run)) end,
    cancel = function(kind, prefix, wid, id)
      local bucket = wf_stops_of(kind, prefix)
      bucket.items[#bucket.items + 1] = {wid, id}
    end,
    set_now = function(now) E.now = now end,
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

-- Apply what the engine decided (steps to enqueue or stop in this slot, outbox entries
-- for others). Call last: it rebinds K_*.
local function fan_in_flush()
  if WF then WF.flush() end
end
