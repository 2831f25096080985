--[[ release: jobs are done. Fenced: only the holder of the current lease may release.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  keep_ms: keep the record this long as completed (0: delete it now)
ARGV[2]  result_ttl_ms: how long results given below are kept
ARGV[3]  n: number of jobs
ARGV[4+3i .. 6+3i], for job i: id, lease token, result ('' = none)
Returns  {status_1, ..., status_n}: OK, LEASE_LOST (the lease expired and the job was
         handed out again, or it is no longer active), NOT_FOUND, CORRUPT.
         A refused item changes nothing. CANCELLED: a cancel was asked while the job
         ran (cancel.lua): it ends cancelled, not completed, and its result is not stored.
Effects  a released job's id stays taken until its dedup window (from its enqueue) ends;
         a result is stored at <prefix>result:<id> (a one-element list) with its TTL;
         under a max_active (flow control) one idle consumer is woken for the freed place.
         A workflow step's result goes to its workflow instead (lib/workflows/fan_in.lua): counted
         here, by membership in its run's set of completed nodes, when the workflow's
         home shares this slot, else forwarded through this queue's outbox; a group that
         fires gathers at most 500 results in this call (the rest through the outbox).
Errors   DURQ_WRONGTYPE when a durq key the call uses holds another Redis type, before any
         change: K_JOBS and K_CONF are checked by their reads (before the first write),
         the others with TYPE: 3, plus 4 when it frees slots, 8 when job control ends
Memory   runs while the server is at maxmemory, as an acknowledgement must
         (lib/core/frees_memory.lua)
Cost     O(n) work in 13 commands per call whatever n is (3 of them TYPE; each write of
         the batch is one variadic command), plus 2 per job with a result (RPUSH, PEXPIRE;
         one DEL for all) and, only where used, per group for slots and per job for
         workflow steps and job control. One EXISTS of the workflow-links and flow keys
         spares a queue with neither the lookups of both.
]]
--- @include "lib/core/status"
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/frees_memory"
--- @include "lib/core/conf"
--- @include "lib/core/record"
--- @include "lib/core/counters"
--- @include "lib/groups/slots"
--- @include "lib/groups/offer"
--- @include "lib/core/expire_done"
--- @include "lib/core/result"
--- @include "lib/control/job_control"
--- @include "lib/core/types"
--- @include "lib/core/typed_read"
--- @include "lib/limits/active_cap"
--- @include "lib/workflows/fan_in"

local keep = tonumber(ARGV[1])
local result_ttl = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
-- K_CONF and K_JOBS are read before the first write, with typed reads that prove their
-- types (lib/core/typed_read.lua); the keys written without such a read are checked here (and
-- K_JOBS too when no job is given: expire_done may then write before reading it).
local problem = keys_error(n > 0 and {'done', 'reasons', 'active'}
  or {'jobs', 'done', 'reasons', 'active'})
if problem then return wrongtype(problem) end
local now = now_ms()
local err, conf = read_by(K_CONF, 'hash', get_conf)
if err then return err end
local window = conf.dedup_window
local ids = {}
for i = 0, n - 1 do ids[i + 1] = ARGV[4 + 3 * i] end
local raws = {}
if n > 0 then
  err, raws = read(K_JOBS, 'hash', 'HMGET', K_JOBS, unpack(ids))
  if err then return err end
end
-- Workflow steps (their links, lib/workflows/fan_in.lua) and a max_active (in the flow hash,
-- lib/limits/active_cap.lua) each have a key; one EXISTS of both tells a queue that uses
-- neither (most), which then skips both lookups: one command instead of two.
local plain = n > 0 and redis.call('EXISTS', K_PREFIX .. WF_LINKS, K_PREFIX .. 'flow') == 0
local links = nil
if not plain then links = fan_in_links(ids) end
local steps = {} -- released workflow steps: {id, token, link, result}
local out = {}
-- Jobs with job control (lib/control/job_control.lua), {id, record} pairs handled once the checks
-- below have passed: those whose cancel was asked end cancelled instead of completed
-- (their result was stored by the cancel); the others end their job control when
-- released. Made when needed: most calls have none.
local cancelled, controlled = nil, nil
local gone, deleted, tombs, kept = {}, {}, {}, {}
local missing = false
local seen = {}
local freed = {} -- group -> slots given back, applied once per group
local results = {} -- id, result, ... stored with the other writes
for i = 1, n do
  local b = 4 + 3 * (i - 1)
  local id = ids[i]
  local status = S_OK
  local raw = raws[i]
  -- the header's fields as plain values (lib/core/record_peek.lua): most jobs need no more
  local ver, state, prio, codec, attempts, maxatt, deliveries, failures, enq, deq, req, flags,
    kpos = rec_peek(raw)
  if not raw then
    status = S_NOT_FOUND
    missing = true
  elseif not ver then
    status = S_CORRUPT
  elseif state ~= ST_ACTIVE or rec_token_of(deliveries, deq) ~= ARGV[b + 1] or seen[id] then
    status = S_LEASE_LOST
  elseif flags >= FLAG_CANCEL and bit.band(flags, FLAG_CANCEL) ~= 0 then
    seen[id] = true
    cancelled = cancelled or {}
    cancelled[#cancelled + 1] = {id, rec_decode(raw)}
    status = S_CANCELLED
  else
    seen[id] = true
    if flags >= FLAG_CANCEL and bit.band(flags, FLAG_CONTROL) ~= 0 then
      controlled = controlled or {}
      controlled[#controlled + 1] = {id, rec_decode(raw)}
    end
    gone[#gone + 1] = id
    local window_end = enq + window
    if keep > 0 then
      kept[#kept + 1] = id
      kept[#kept + 1] = struct.pack(REC_FMT, ver, ST_COMPLETED, prio, codec, attempts, maxatt,
        deliveries, failures, enq, deq, req, flags) .. string.sub(raw, REC_FIXED + 1)
      tombs[#tombs + 1] = math.max(now + keep, window_end)
      tombs[#tombs + 1] = id
    else
      deleted[#deleted + 1] = id
      if window_end > now then
        tombs[#tombs + 1] = window_end
        tombs[#tombs + 1] = id
      end
    end
    if links and links[i] then
      steps[#steps + 1] = {id, ARGV[b + 1], links[i], ARGV[b + 2]}
    elseif ARGV[b + 2] ~= '' then
      results[#results + 1] = id
      results[#results + 1] = ARGV[b + 2]
    end
    if bit.band(flags, FLAG_SLOT) ~= 0 then -- rec_has_slot
      local g = string.sub(raw, REC_FIXED + 2, kpos - 1)
      freed[g] = (freed[g] or 0) + 1
      touch(g) -- a freed slot can make the group eligible again
    end
  end
  out[i] = status
end
-- giving slots back touches the group keys (and offers the groups) too
if next(freed) then problem = keys_error({'gactive', 'glimit', 'rr', 'rrset'}) end
if cancelled or controlled then
  problem = problem or keys_error({'gactive', 'glimit', 'rr', 'rrset', 'keys', 'delayed', 'ctl',
    'progress'})
end
if problem then return wrongtype(problem) end
if cancelled then
  for _, item in ipairs(cancelled) do control().end_cancelled(item[1], item[2], now) end
end
fan_in_released(steps, now)
store_results(results, result_ttl)
if #gone > 0 then
  -- the tombstone goes first: from the moment the record is gone its id stays taken
  if #tombs > 0 then redis.call('ZADD', K_DONE, unpack(tombs)) end
  if #kept > 0 then redis.call('HSET', K_JOBS, unpack(kept)) end
  if #deleted > 0 then
    redis.call('HDEL', K_JOBS, unpack(deleted))
    redis.call('HDEL', K_REASONS, unpack(deleted))
  end
  redis.call('ZREM', K_ACTIVE, unpack(gone))
  for g, slots in pairs(freed) do slot_add(g, -slots) end
  count('completed', #gone)
  if not plain then cap_freed() end
end
if controlled then
  for _, item in ipairs(controlled) do
    control().finish(item[1], item[2], now, keep > 0 and 'kept' or 'released')
  end
end
if missing then
  -- a finished job leaves a tombstone: its late holder lost the lease, the id is known
  for i = 1, n do
    if out[i] == S_NOT_FOUND and redis.call('ZSCORE', K_DONE, ids[i]) then
      out[i] = S_LEASE_LOST
    end
  end
end
expire_done(now, 2 * n + 10)
offer_touched()
flush_counters()
wake_if_needed()
fan_in_flush()
return out
