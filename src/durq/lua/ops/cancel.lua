--[[ cancel: jobs are no longer wanted.
A job that has not started (pending, delayed) or waits for its next attempt (backing off)
ends at once in the terminal state cancelled and is never delivered: it leaves the
delayed set (a pending job of default priority stays listed, skipped when dequeue
reaches it), gives back its group slot, frees its dedup key if the key still points to
it, and hands the key on to a keep-last follow-up waiting for it. A running job is
flagged (FLAG_CANCEL in its record, the durable truth): extend answers CANCELLED to its
worker, and release, requeue, defer, rate_limited or the expiry of its lease end it
cancelled, never retried; a message on the queue's cancel channel (<prefix>cancel, the
job id) may tell its worker sooner. Either way the waiter of the job's result gets a
cancelled outcome now: from this call on the job can end in no other state.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  result_ttl_ms: how long the cancelled outcome stays at <prefix>result:<id>
ARGV[2..] ids
Returns  {status_1, state_1, ...}: for each id its status and the state it was found in
         (lib/core/record_layout.lua; 0 when unknown): CANCELLED (ended now), CANCELLING
         (running: flagged, or flagged before), FINISHED (it had ended: completed, dead,
         superseded, cancelled or expired; a finished job whose record is gone reports
         state completed), NOT_FOUND, CORRUPT (unreadable record; nothing changed).
Errors   DURQ_WRONGTYPE when a durq key holds another Redis type, before any change
Cost     O(ids) commands (a prioritized pending job: O(log n) to leave its zset).
]]
--- @include "lib/core/status"
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/record"
--- @include "lib/core/counters"
--- @include "lib/groups/keys"
--- @include "lib/groups/offer"
--- @include "lib/control/job_control"
--- @include "lib/holding/keys"
--- @include "lib/core/types"

local ttl = tonumber(ARGV[1])
local problem = keys_error({'jobs', 'done', 'reasons', 'active', 'delayed', 'keys', 'conf',
  'gactive', 'glimit', 'rr', 'rrset', 'ctl', 'progress'})
if problem then return wrongtype(problem) end
local now = now_ms()
local out = {}
for i = 2, #ARGV do
  local id = ARGV[i]
  local raw = redis.call('HGET', K_JOBS, id)
  local r = rec_decode(raw)
  local status, state = S_FINISHED, r and r.state or 0
  if not raw then
    -- a tombstone: it finished and its record was not kept
    if redis.call('ZSCORE', K_DONE, id) then state = ST_COMPLETED else status = S_NOT_FOUND end
  elseif not r then
    status = S_CORRUPT
  elseif r.state == ST_PENDING or r.state == ST_DELAYED or r.state == ST_HELD then
    local listed = false
    if r.state == ST_DELAYED then
      redis.call('ZREM', K_DELAYED, id)
    elseif r.state == ST_HELD then
      held_forget(id)
    elseif r.prio == 0 then
      listed = true -- removing it from the middle of its list would cost O(n)
      ready_add(r.group, -1)
    else
      -- pcall: if the zset holds garbage, the id is not listed in it anyway
      redis.pcall('ZREM', ready_prio(r.group), id)
      ready_add(r.group, -1)
    end
    local message = 'cancelled before it started'
    if r.deliveries > 0 then message = 'cancelled while it waited for its next attempt' end
    control().end_unstarted(id, r, now, ST_CANCELLED, ttl, listed, {message = message})
    status = S_CANCELLED
  elseif r.state == ST_ACTIVE then
    if bit.band(r.flags, FLAG_CANCEL) == 0 then
      r.flags = bit.bor(r.flags, FLAG_CANCEL)
      redis.call('HSET', K_JOBS, id, rec_encode(r))
      control().outcome(id, 'cancelled', now, ttl)
      -- a hint only (pcall: a user without the channel's permission still cancels)
      redis.pcall('PUBLISH', K_PREFIX .. 'cancel', id)
    end
    status = S_CANCELLING
  end
  -- A workflow step cancelled here reports to its workflow like a dead one
  -- (lib/control/job_control.lua end_unstarted, end_cancelled); a whole workflow is cancelled by
  -- workflow_cancel.lua.
  out[#out + 1] = status
  out[#out + 1] = state
end
offer_touched()
flush_counters()
wake_if_needed()
return out
