--- @include "lib/core/keys"
--- @include "lib/core/record"
--- @include "lib/core/counters"
--- @include "lib/core/reason"
--- @include "lib/core/dead_letter"
--- @include "lib/core/type_check"
--- @include "lib/holding/keys"
--- @include "lib/holding/seen"

-- The holding area (docs/deployment.md, "Jobs wait for a worker that can run them"): jobs
-- whose task, at the version they carry, the worker that fetched them does not run. A
-- capability is "<task>" (version 1) or "<task>@<version>". Keys, under the queue's
-- prefix (so in its slot):
--   caps        hash  capability -> until when a worker of the queue's last saying
--                     that it runs it covers (ms, server time: lib/holding/seen.lua;
--                     caps.lua at a worker's start and while jobs are held,
--                     caps_seen.lua otherwise)
--   held:<cap>  zset  job id -> when it was held (ms): the jobs waiting for <cap>
--   heldidx     zset  capability -> when its oldest held job was held (ms)
-- A held job's record is in state HELD, its attempt given back, its group slot freed,
-- and it returns to the head of its group when a capable worker brings it back
-- (unhold.lua). It is dead-lettered (reason unknown_task) only once it was held for the
-- grace and the grace has passed since the time the last saying of a worker of the queue
-- that it runs its capability covered (caps.lua).
-- The problem with the holding keys of `caps` (and the index, the caps hash), or nil.
local function held_types_error(caps)
  local problem = type_error(K_PREFIX .. HELD_INDEX, 'zset')
    or type_error(K_PREFIX .. HELD_CAPS, 'hash')
  for i = 1, #caps do
    problem = problem or type_error(held_key(caps[i]), 'zset')
  end
  return problem
end

-- An id met in a held:<cap> (and taken out of it) whose job is no longer held (record r,
-- or nil when it is gone): ended by a version that did not take it out (durq 0.1.0,
-- which ends it as a delayed job: lib/core/record_layout.lua). The `held` count goes
-- with the id (lib/holding/keys.lua).
local function held_left(r)
  if not r or r.state ~= ST_HELD then count('held', -1) end
end

-- The task and version a capability names.
local function held_task(cap)
  local task, version = string.match(cap, '^(.*)@(%d+)$')
  if task then return task, version end
  return cap, '1'
end

-- Dead-letter job id (record r, held or active) whose capability no live worker ran for
-- `grace` ms; `since`: when the job was held (nil: now, by the worker that fetched it).
local function held_bury(id, r, cap, now, grace, since)
  local task, version = held_task(cap)
  local what = 'task ' .. task
  if version ~= '1' then what = what .. ' at version ' .. version end
  set_reason(id, {reason = 'unknown_task', at = now, task = task, version = tonumber(version),
    held_since = since, message = 'no worker of this queue has run ' .. what .. ' for '
      .. string.format('%d', grace / 1000) .. ' s (unknown_task_grace)'})
  -- the dedup key it held again (hold.lua) is free (pcall: garbage in the hash must not
  -- stop the sweep)
  if r.key ~= '' and redis.pcall('HGET', K_KEYS, r.key) == id then
    redis.pcall('HDEL', K_KEYS, r.key)
  end
  kill(id, r, now)
end
