--[[ hold: jobs whose task (at their version) the worker that fetched them does not run
wait in the queue's holding area (lib/holding/held.lua) for a worker that does, instead
of failing: no attempt is counted (the delivery's is given back), the group slot is
freed, the job leaves `active`; it holds its dedup key again (freed when it was fetched)
unless another job took it meanwhile. Fenced like release.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  grace_ms: unknown_task_grace; 0: dead-letter at once (reason unknown_task), as
         durq did before the holding area
ARGV[2]  worker: the id of the worker that holds them (kept in the reason, for people)
ARGV[3]  n: number of jobs
ARGV[4+3i .. 6+3i], for job i: id, lease token, capability ("<task>" or "<task>@<v>")
Returns  {status_1, ..., status_n}: OK (held), DEAD (grace 0), LEASE_LOST, NOT_FOUND,
         CORRUPT; CANCELLED when a cancel was asked while the job ran: it ends
         cancelled instead of being held.
Effects  under a max_active (flow control) one idle consumer is woken for the freed
         place; no consumer is woken for the held jobs themselves: only a capable worker
         brings them back (unhold.lua), so incapable workers never pass them around.
Errors   DURQ_WRONGTYPE when a durq key holds another Redis type, before any change
Memory   runs while the server is at maxmemory, as an acknowledgement must
         (lib/core/frees_memory.lua)
Cost     O(n) commands.
]]
--- @include "lib/core/status"
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/frees_memory"
--- @include "lib/core/lease"
--- @include "lib/core/send_back"
--- @include "lib/core/types"
--- @include "lib/limits/active_cap"
--- @include "lib/holding/held"

local grace, worker, n = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local caps = {}
for i = 0, n - 1 do caps[#caps + 1] = ARGV[6 + 3 * i] end
local problem = keys_error({'jobs', 'done', 'active', 'dead', 'conf', 'gactive', 'glimit',
  'rr', 'rrset', 'reasons', 'keys', 'ctl', 'progress'}) or held_types_error(caps)
if problem then return wrongtype(problem) end
local now = now_ms()
local out = {}
for i = 0, n - 1 do
  local b = 4 + 3 * i
  local id, cap = ARGV[b], ARGV[b + 2]
  local r, status = held(id, ARGV[b + 1])
  if r and ends_cancelled(id, r, now) then -- its cancel was asked: it is not held
    status = S_CANCELLED
  elseif r then
    if grace <= 0 then -- the attempt counts, as it did before the holding area
      held_bury(id, r, cap, now, 0, nil)
      status = S_DEAD
    else
      if r.attempts > 0 then r.attempts = r.attempts - 1 end
      drop_slot(r)
      redis.call('ZADD', held_key(cap), 'NX', now, id)
      redis.call('ZADD', K_PREFIX .. HELD_INDEX, 'NX', now, cap)
      redis.call('ZREM', K_ACTIVE, id)
      r.state = ST_HELD
      r.flags = bit.bor(bit.band(r.flags, FLAG_CONTROL), FLAG_RETURNING)
      redis.call('HSET', K_JOBS, id, rec_encode(r))
      -- it never started: it holds its dedup key again (freed when it was fetched), unless
      -- another job took the key meanwhile (that one keeps it)
      if r.key ~= '' then redis.call('HSETNX', K_KEYS, r.key, id) end
      local task, version = held_task(cap)
      set_reason(id, {reason = 'held', at = now, task = task, version = tonumber(version),
        worker = worker, message = 'waiting for a worker that runs this task at this version'})
      count('held', 1)
    end
  end
  out[#out + 1] = status
end
if n > 0 then cap_freed() end
offer_touched()
flush_counters()
wake_if_needed()
return out
