--- @include "lib/core/keys"
--- @include "lib/core/record"
--- @include "lib/core/counters"
--- @include "lib/control/job_control"
--- @include "lib/workflows/link"

-- A workflow that fails (policy "fail") or is cancelled stops its steps, STOP_CHUNK per
-- call (lib/workflows/fan_in.lua). Until the last chunk of a queue of its home's slot went
-- through, a guard there keeps its steps from starting: dequeue.lua ends a guarded step
-- it pops as the chunk would have. So a step that did not start never does, whatever
-- the size of the workflow:
--   <queue prefix>wfx   hash  "<workflow id>.<run>" -> "<kind>\t<workflow id>", kind 'X'
--                             (it failed) or 'K' (it was cancelled)
-- A queue with no guard pays one EXISTS per dequeue call.
local WF_GUARDS = 'wfx'

-- End step `id` (record r: pending or delayed, already out of the ready or delayed
-- structures, except a listed default-priority one: `listed`) because its workflow
-- `wid` stopped: as cancel.lua ends a job that did not start. Its link goes first, so
-- its end does not report to the workflow.
local function wf_stop_unstarted(id, r, now, kind, wid, listed)
  redis.call('HDEL', K_PREFIX .. WF_LINKS, id)
  local message = 'its workflow was cancelled'
  if kind == 'X' then
    message = 'its workflow failed'
    count('wf_steps_cancelled', 1)
  end
  control().end_unstarted(id, r, now, ST_CANCELLED, nil, listed,
    {by = 'workflow ' .. wid, message = message})
end

-- dequeue.lua: the kind and workflow of the stop that guards step `id` from starting,
-- or nil: found through the step's link (only workflow steps have one). (pcall: garbage
-- in these hashes must not stop the queue.)
local function wf_guard(id)
  local link = redis.pcall('HGET', K_PREFIX .. WF_LINKS, id)
  if type(link) ~= 'string' then return nil end
  local _, wid, _, _, run = wf_parse_link(link)
  if not wid then return nil end
  local v = redis.pcall('HGET', K_PREFIX .. WF_GUARDS, wid .. '.' .. run)
  if type(v) ~= 'string' then return nil end
  return string.sub(v, 1, 1), wid
end
