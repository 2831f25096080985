--- @include "lib/core/keys"
--- @include "lib/core/status"
--- @include "lib/core/clock"
--- @include "lib/core/conf"
--- @include "lib/core/record"
--- @include "lib/core/counters"
--- @include "lib/groups/push"
--- @include "lib/groups/offer"
--- @include "lib/core/delayed"
--- @include "lib/core/reason"
--- @include "lib/core/types"
--- @include "lib/holding/keys"

-- Enqueueing one job into the queue the K_* keys name (enqueue.lua, publish.lua).
local ENQUEUE_FIELDS = 9 -- ARGV values per job

local function supersede(other, r, by, now)
  -- like a released job's, the id stays taken until the dedup window after its enqueue
  -- (the record is kept until then, see lib/core/expire_done.lua)
  local window_end = r.enq + get_conf().dedup_window
  if r.state == ST_DELAYED then
    redis.call('ZREM', K_DELAYED, other)
    redis.call('ZADD', K_DONE, window_end, other)
  elseif r.state == ST_HELD then -- it leaves its holding area (before its reason goes)
    held_forget(other)
    redis.call('ZADD', K_DONE, window_end, other)
  elseif r.prio ~= 0 then
    -- pcall: if the zset holds garbage, the id is not listed in it anyway
    redis.pcall('ZREM', ready_prio(r.group), other)
    ready_add(r.group, -1)
    redis.call('ZADD', K_DONE, window_end, other)
  else
    -- Removing an id from the middle of a list costs O(n): the id stays listed and the
    -- record stays (without payload) until dequeue reaches and discards both, so the id
    -- cannot be reused while it is still listed.
    ready_add(r.group, -1)
  end
  r.state = ST_SUPERSEDED
  r.tail = string.char(#r.group) .. r.group .. string.char(#r.key) .. r.key
  redis.call('HSET', K_JOBS, other, rec_encode(r))
  set_reason(other, {reason = 'superseded', by = by, at = now})
  count('superseded', 1)
end

-- The problem with the keys an enqueue of the n jobs at ARGV[b0 ...] may use, found
-- before its first write (lib/core/types.lua); nil when there is none.
local function enqueue_problem(b0, n)
  local parts, groups = {'jobs', 'done', 'rr', 'rrset'}, {} -- group -> prioritized jobs?
  local keyed, delayed, prioritized, named = false, false, false, false
  for i = 0, n - 1 do
    local b = b0 + ENQUEUE_FIELDS * i
    local g, prio = ARGV[b + 6], tonumber(ARGV[b + 3]) ~= 0
    local d = ARGV[b + 2]
    delayed = delayed or string.byte(d, 1) == 64 or tonumber(d) > 0 -- '@': an eta
    prioritized = prioritized or prio
    named = named or g ~= ''
    keyed = keyed or ARGV[b + 7] ~= ''
    groups[g] = groups[g] or prio
  end
  -- dedup lookups, and superseding (of delayed jobs too)
  if keyed then parts[#parts + 1] = 'keys'; parts[#parts + 1] = 'reasons' end
  if keyed or delayed then parts[#parts + 1] = 'delayed' end
  -- settings, and the FIFO sequence of priorities (lib/groups/push.lua)
  if keyed or named or prioritized then parts[#parts + 1] = 'conf' end
  if named then parts[#parts + 1] = 'glimit'; parts[#parts + 1] = 'gactive' end
  local problem = keys_error(parts)
  for g, prio in pairs(groups) do
    -- the list always (offering the group reads it), the zset when jobs go there
    problem = problem or type_error(ready_list(g), 'list')
    if prio then problem = problem or type_error(ready_prio(g), 'zset') end
  end
  return problem
end

-- Returns status, ref for one job. Reads come first; the id is placed before its record
-- is written, so a failing write never leaves a record that no structure lists.
local function enqueue_one(now, id, payload, delay, prio, maxatt, codec, g, key, replace)
  if redis.call('HEXISTS', K_JOBS, id) == 1 then return S_EXISTS, id end
  local tomb = redis.call('ZSCORE', K_DONE, id)
  if tomb then
    if tonumber(tomb) > now then return S_EXISTS, id end
    redis.call('ZREM', K_DONE, id)
  end
  local status, ref = S_CREATED, id
  if key ~= '' then
    local other = redis.call('HGET', K_KEYS, key)
    if other then
      local r = rec_decode(redis.call('HGET', K_JOBS, other))
      -- a held job never started (hold.lua gave it its key back): it counts as waiting
      if r and (r.state == ST_PENDING or r.state == ST_DELAYED or r.state == ST_HELD) then
        if replace ~= '1' then
          count('deduplicated', 1)
          return S_DEDUPLICATED, other
        end
        supersede(other, r, id, now)
        status, ref = S_REPLACED, other
      end
    end
  end
  if delay > 0 then
    schedule(id, now + delay)
    redis.call('HSET', K_JOBS, id, rec_new(ST_DELAYED, prio, codec, maxatt, now, g, key, payload))
  else
    group_push(g, id, prio, false)
    redis.call('HSET', K_JOBS, id, rec_new(ST_PENDING, prio, codec, maxatt, now, g, key, payload))
    ready_add(g, 1)
    touch(g)
  end
  if key ~= '' then redis.call('HSET', K_KEYS, key, id) end
  count('enqueued', 1)
  return status, ref
end
