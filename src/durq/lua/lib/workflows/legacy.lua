--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/outbox"
--- @include "lib/workflows/link"

-- Workflows that durq 0.1.0 submitted (data format 1, durq.data_format) run on under
-- this engine, in the layout 0.1.0 gave them: they are read where they are, never
-- converted, because 0.1.0's workers may still run beside this version (a rolling
-- deploy) and apply their scripts to the same keys. 0.1.0's layout, under the home
-- prefix:
--   wf:<wid>       one hash, header and structure: state, policy, created, ttl, plan,
--                  Q (JSON: queue prefix -> its leaf nodes), bars (the barriers, comma
--                  separated), t<n>, L<x> and B<b> (one field each), p<n> (the parked
--                  spec, without the expiry), L0, c<x> (a leaf index), i<x>, r<n>, w<n>;
--                  no run
--   wf:<wid>:o:<b> set: the open members of barrier b
-- Its steps' ids are <wid>.<node>, their links have no run (lib/workflows/link.lua). The
-- engine (lib/workflows/fan_in.lua) takes such a workflow as the run '' (its context has
-- `legacy`: the structure is the header's hash, the step ids lack the run) and, where
-- the layouts differ, does what 0.1.0 does, so that the two count alike: a member counts
-- when it leaves the open set (SREM, then HSETNX of its result), and the call that
-- empties the set fires the barrier. It writes only what 0.1.0 reads: links without a
-- run, 'S' entries in 0.1.0's layout (below), 'X' and 'K' entries without the sender
-- and the consume number, 'C', 'D' and 'R' entries with an empty run as last field
-- (0.1.0 ignores it); never 'F', 'E' or 'Q', which 0.1.0's couriers dead-letter. So a
-- barrier fires in one call and a stop ends its steps in one call, as in 0.1.0 (their
-- costs per call are 0.1.0's: O(members), O(steps)); a node's leaves start 500 per call
-- from 0.1.0's cursor (an index), so that either version continues the other's start.
local function wf_legacy_build(E)
  -- Member n of barrier b completed with v: counted once, by leaving the open set.
  local function member(w, b, n, v)
    if redis.call('SREM', w.wk .. ':o:' .. b, n) == 0 then return false end
    redis.call('HSETNX', w.wk, 'r' .. n, v)
    return true
  end

  local function all_counted(w, b)
    return redis.call('SCARD', w.wk .. ':o:' .. b) == 0
  end

  -- Barrier b fires: its members' results, in order, as a JSON list (consumed).
  local function gather(w, b)
    local members = wf_split(redis.call('HGET', w.wk, 'B' .. b) or '', ',')
    local fields = {}
    for i = 1, #members do fields[i] = 'r' .. members[i] end
    local values = E.hmget(w.wk, fields)
    for i = 1, #members do
      if not values[i] then values[i] = 'null' end
    end
    E.hdel(w.wk, fields)
    return '[' .. table.concat(values, ',') .. ']'
  end

  -- The run ends early (kind 'X': failed, 'K': cancelled): its parked steps never start
  -- (listed, to be shown cancelled); the others stop in their queues. Read before the
  -- structure goes (clear).
  local function stop(w, kind)
    local q = redis.call('HGET', w.wk, 'Q')
    local parked = {}
    if not q then return parked end
    for prefix, leaves in pairs(cjson.decode(q)) do
      local fields = {}
      for i = 1, #leaves do fields[i] = 'p' .. tostring(leaves[i]) end
      local specs = E.hmget(w.wk, fields)
      local bucket = E.stops_of(kind, prefix)
      bucket.legacy = true
      for i = 1, #leaves do
        local leaf = tostring(leaves[i])
        if specs[i] then
          parked[#parked + 1] = leaf
        else
          bucket.items[#bucket.items + 1] = {w.wid, w.sid .. '.' .. leaf}
        end
      end
    end
    return parked
  end

  -- The run ended (wf_close wrote its state): the structure and the open sets go, the
  -- summary stays (0.1.0's fields), with its TTL.
  local function clear(w, parked)
    local keep = redis.call('HMGET', w.wk, 'state', 'policy', 'created', 'finished', 'plan',
      'ttl', 'error', 'bars')
    for b in string.gmatch(keep[8] or '', '[^,]+') do redis.call('UNLINK', w.wk .. ':o:' .. b) end
    redis.call('UNLINK', w.wk)
    local ttl = tonumber(keep[6]) or 3600000
    redis.call('HSET', w.wk, 'state', keep[1], 'policy', keep[2] or 'fail', 'created',
      keep[3] or 0, 'finished', keep[4] or E.now, 'plan', keep[5] or '[]', 'ttl', ttl)
    if keep[7] then redis.call('HSET', w.wk, 'error', keep[7]) end
    if parked and #parked > 0 then
      redis.call('HSET', w.wk, 'cancelled', table.concat(parked, ','))
    end
    redis.call('PEXPIRE', w.wk, ttl)
  end

  -- Steps (engine items) to start in queue `prefix` of another slot: 'S' entries in
  -- 0.1.0's layout (an item: id, group, priority, max attempts, delay ms, link,
  -- payload), applied once in effect by the record or tombstone they find, as in 0.1.0.
  local function send_starts(prefix, items)
    for c = 1, #items, 100 do
      local parts = {'S', prefix}
      for i = c, math.min(c + 99, #items) do
        local it = items[i]
        parts[#parts + 1] = table.concat({it[1], it[6], it[4], it[5], it[3], it[7], it[2]}, '\0')
      end
      outbox_push(E.self, 's:' .. items[c][1], table.concat(parts, '\0'), E.now or now_ms())
    end
  end

  -- Start node x with input v (lib/workflows/fan_in.lua wf_start) as 0.1.0 does: its
  -- leaves (L<x>, one field) from the cursor c<x>, an index that 0.1.0 reads too, 500 per
  -- call (0.1.0's START_CHUNK); the rest through an 'R' entry when `continue` is set.
  -- A leaf starts once: its parked spec is consumed.
  local function start(w, x, v, continue)
    local list = redis.call('HGET', w.wk, 'L' .. x)
    local leaves = list and wf_split(list, ',') or {x}
    local from = 1
    if #leaves > 500 then from = tonumber(redis.call('HGET', w.wk, 'c' .. x)) or 1 end
    local to = math.min(from + 499, #leaves)
    if from > to then return end
    local fields = {}
    for i = from, to do fields[#fields + 1] = 'p' .. leaves[i] end
    local specs = E.hmget(w.wk, fields)
    local taken = {}
    for i = 1, #fields do
      if specs[i] then
        local leaf = leaves[from + i - 1]
        local f = wf_split(specs[i], '\0')
        taken[#taken + 1] = fields[i]
        E.enqueue(f[1], {w.sid .. '.' .. leaf, f[7] .. ((f[6] == '1' and v) or '') .. f[8],
          tonumber(f[5]), tonumber(f[3]), tonumber(f[4]), f[2],
          wf_link(w.home, w.wid, leaf, w.policy, ''), ''}, w)
      end
    end
    if #taken > 0 then E.hdel(w.wk, taken) end
    if to < #leaves then
      redis.call('HSET', w.wk, 'c' .. x, to + 1)
      if v then redis.call('HSET', w.wk, 'i' .. x, v) end
      if continue then
        outbox_push(w.home, 'r:' .. w.wid .. '.' .. x .. ':' .. to,
          table.concat({'R', w.home, w.wid, x, '1', ''}, '\0'), E.now or now_ms())
      end
    elseif from > 1 then -- done: a late 'R' finds the cursor past the end
      redis.call('HSET', w.wk, 'c' .. x, #leaves + 1)
      redis.call('HDEL', w.wk, 'i' .. x)
    end
  end

  return {member = member, all_counted = all_counted, gather = gather, stop = stop,
    clear = clear, send_starts = send_starts, start = start}
end

-- workflow_deliver.lua: whether the split entry f ('S', 'X' or 'K') has 0.1.0's layout.
-- 'S': the first item's link (f[8]) has tabs, where this version has a number. 'X',
-- 'K': f[5] is a step id ('<wid>.<node>', with a dot) or absent, where this version has
-- the consume number (digits, or '') and at least one id after it.
local function wf_legacy_entry(f)
  if f[1] == 'S' then return f[8] ~= nil and string.find(f[8], '\t', 1, true) ~= nil end
  return #f < 6 or string.match(f[5], '^%d*$') == nil
end

-- workflow_deliver.lua: the items of a 'S' entry in 0.1.0's layout, as the engine's
-- items (lib/workflows/steps.lua: id, payload, delay, priority, max attempts, group,
-- link, expiry).
local function wf_legacy_starts(f)
  local items = {}
  for i = 3, #f - 6, 7 do
    items[#items + 1] = {f[i], f[i + 6], tonumber(f[i + 4]), tonumber(f[i + 2]),
      tonumber(f[i + 3]), f[i + 1], f[i + 5], ''}
  end
  return items
end
