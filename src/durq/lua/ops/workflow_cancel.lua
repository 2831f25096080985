--[[ workflow_cancel: a running workflow is no longer wanted (WorkflowHandle.cancel).
Run in the workflow's home slot. The workflow ends in the terminal state cancelled, with
the error {"reason": "cancelled", "at": ms} as its result (a waiter gets it now), and
its callback never runs. Its steps (lib/workflows/fan_in.lua wf_abort, wf_stop_*): parked ones
(not started) never start; pending, delayed or backing-off ones end cancelled, as
cancel.lua ends a job that did not start (listed ones are skipped when dequeue reaches
them), and are never delivered; running ones are flagged as cancel.lua flags a running
job (FLAG_CANCEL, a hint on <prefix>cancel), so their workers stop them and their
release ends them cancelled, never completed. This call stops the first STOP_CHUNK
steps and puts up a guard in each queue of this slot (lib/workflows/stop.lua: dequeue ends a
guarded step it pops); the next chunks follow through this queue's outbox ('E'
entries). Steps in queues of another slot are cancelled through the outbox too ('K'
entries, workflow_deliver.lua): idempotent, delivered at least once; a start still on
its way there is consumed ('Q' entries, lib/workflows/seq.lua) and starts nothing.
KEYS     the home queue's key vector (lib/core/keys.lua)
ARGV[1]  the workflow id
Returns  {status, state}: CANCELLED (it ran: it ended cancelled now), FINISHED (it had
         ended; state: completed, failed or cancelled), NOT_FOUND (no such workflow, or
         its summary expired; state '') (lib/core/status.lua)
Errors   DURQ_WRONGTYPE when the workflow's key holds another Redis type, before any
         change
Cost     O(STOP_CHUNK + queues of the workflow) commands; like the policy "fail",
         which stops the same steps
]]
--- @include "lib/core/status"
--- @include "lib/core/type_check"
--- @include "lib/workflows/fan_in"

local wid = ARGV[1]
local wk = K_PREFIX .. 'wf:' .. wid
local problem = type_error(wk, 'hash')
if problem then return wrongtype(problem) end
local state = redis.call('HGET', wk, 'state')
if not state then return {S_NOT_FOUND, ''} end
if state ~= 'running' then return {S_FINISHED, state} end
local engine = wf_engine()
engine.set_now(now_ms())
engine.abort(K_PREFIX, wid)
fan_in_flush()
return {S_CANCELLED, 'cancelled'}
