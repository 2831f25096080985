--[[ dequeue: hand out up to N ready jobs under a lease of L ms.
First its upkeep: it reclaims expired leases (at most RECLAIM_MAX), promotes due delayed
jobs (at most PROMOTE_MAX) and fires the due ticks of periodic schedules (at most
SCHED_MAX schedules, lib/schedules/due.lua), each while the call's budget of server time
lasts (lib/core/budget.lua: at least one of each per call); then it serves the eligible groups
in turn: each group gives up to its weight per turn (all that is asked when it is the
only eligible group), never more than its free slots. Upkeep left for later makes
next_ms 0 and wakes another idle consumer, so it goes on at once.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  n: jobs wanted (>= 1)
ARGV[2]  lease_ms (>= 1)
ARGV[3]  consumer id (optional): names the idle consumer that may hold the flow-control
         alarm (lib/limits/park.lua), without it the consumer plans every wait itself;
         and, when the call finds nothing, lists the consumer with the end of the wait
         it plans, for calls whose leases become the queue's earliest to wake it
         (lib/core/idlers.lua)
ARGV[4]  batch mode (optional, durq.Batch): '' none; 'b' a batch: a group's items in the
         call hold ONE of its slots under a group limit (the first item carries it), not
         one each; 'g' a batch of one group (by_group): as 'b', from the first eligible
         group that hands out any, turns of that group only (its place in the rotation
         taken as usual); 't' a top-up of such a batch from group ARGV[5] only, outside
         the rotation: no slot taken (the batch holds one), the group never parked here,
         and the wake marker passed on when other groups are eligible and none was taken
Returns  {now, lease_deadline, next_ms, reclaimed, id_1, record_1, ..., id_k, record_k}
         now and lease_deadline in server ms; records as in lib/core/record_layout.lua, already
         updated (state active, attempts and deliveries counted, dequeued_at = now).
         next_ms, when no job was handed out: ms until the next delayed job or schedule
         tick is due or the next lease expires (-1: none), so an idle consumer knows how
         long to block.
         Under flow control (lib/limits/gate_hooks.lua: rate limits, max_active, pauses) it also
         counts when a parked group or the queue may start again, for the one consumer
         that holds the alarm; a consumer leaving with jobs wakes another to take it.
Errors   DURQ_WRONGTYPE when a durq key the call uses holds another Redis type, before
         any change (lib/core/types.lua): the keys read before the first write are checked by
         those reads, the others with TYPE just before it (6 TYPE in a call that reclaims,
         promotes and fires nothing, 7 under a group_limit; up to 11 when it does one of
         these). Records that cannot be read are quarantined as dead letters (reason
         corrupt_record), and jobs that cannot go back to a group whose keys hold another
         type are dead-lettered (reason corrupt_group: replay them once the keys are
         repaired), so the queue keeps working.
Memory   refused with OOM while the server is at maxmemory, before any change: the
         worker backs off (lib/core/needs_memory.lua)
Cost     O(n + RECLAIM_MAX + PROMOTE_MAX + SKIP_MAX + PARK_MAX) commands, independent of
         queue length and of the number of groups and workers; plus O(1) per due schedule
         and per tick fired, and one ZRANGEBYSCORE when none is due. The upkeep (leases,
         delayed jobs, ticks, stale ids) stops once the call ran BUDGET_MS (0.5 ms) of
         server time, past its first item of each kind: a backlog of any size (a catch-up
         after downtime) is spread over calls. Past 50 jobs, serving stops once the call
         ran 1 ms (serve()): the consumer comes back for the rest.
         Handing out a group turn's plain jobs is a fixed number of commands whatever
         their number (LPOP, HMGET, HSET, ZADD; one HMGET and one HDEL for their dedup
         keys); jobs under job control and stale ids cost commands of their own. While a
         workflow that failed or was cancelled stops its steps in this queue (a guard,
         lib/workflows/stop.lua), a popped step of it ends cancelled instead of starting, for the
         cost of WF_STOP_COST skipped ids; one EXISTS per call tells whether any is.
         Idle consumers (lib/core/idlers.lua): a ZRANGE per call that hands out jobs
         (and a ZREM with a consumer id), a ZRANGEBYSCORE more when their leases are
         the queue's earliest, two rings at most; a ZADD when none is handed (three
         commands when it lists the consumer anew).
]]
--- @include "lib/core/status"
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/needs_memory"
--- @include "lib/core/conf"
--- @include "lib/core/record"
--- @include "lib/core/counters"
--- @include "lib/groups/push"
--- @include "lib/groups/room"
--- @include "lib/groups/pop"
--- @include "lib/groups/offer"
--- @include "lib/limits/gate"
--- @include "lib/groups/slots"
--- @include "lib/core/make_ready"
--- @include "lib/core/dead_letter"
--- @include "lib/control/job_control"
--- @include "lib/core/quarantine"
--- @include "lib/core/reason"
--- @include "lib/core/expire_done"
--- @include "lib/core/types"
--- @include "lib/core/typed_read"
--- @include "lib/schedules/due"
--- @include "lib/core/idlers"
--- @include "lib/workflows/stop"
--- @include "lib/core/budget"

local RECLAIM_MAX = 100
local PROMOTE_SLICE = 100 -- due delayed jobs read at a time
local SKIP_MAX = 1000   -- stale ids (superseded, orphaned) discarded per call at most
-- PROMOTE_MAX (1000 delayed jobs promoted per call), EXPIRE_MAX (100 tombstones expired
-- per call), HSET_CHUNK and WF_STOP_COST are written where they are used: this script
-- is at Lua's limit of 200 locals in its main function (Redis 6.2 runs it by EVAL)

-- The keys a call may write, or read after its first write: each must be checked before
-- the call's first write (lib/core/type_check.lua). A call that reclaims, promotes and fires
-- nothing (the common one) first writes in serve, and the reads it makes before that
-- (the due leases and delayed jobs, group_settings, the length of K_RR) are typed: they
-- prove their keys' types for free (lib/core/typed_read.lua), so only the other keys are
-- checked, just before that first write. A call with leases to reclaim, delayed jobs to
-- promote or ticks to fire checks the rest before that work.
local WRITTEN = {'jobs', 'active', 'delayed', 'dead', 'done', 'reasons', 'conf', 'rr',
  'rrset', 'gactive', 'glimit', 'gweight'}
-- parts of WRITTEN whose type a typed read proved before any write; made with its fields,
-- so that Lua sizes the table once (a table that grows is rebuilt at each power of two)
local proven = {active = false, delayed = false, conf = false, gweight = false,
  glimit = false, rr = false}
local guarded = false -- WRITTEN was checked: no later write meets a key of another type

-- Call before the call's first write: the problem with a key of WRITTEN not proven, or nil.
-- (A function of few upvalues: a closure costs every call for each, lib/limits/gate.lua.)
local function guard()
  if guarded then return nil end
  guarded = true
  return keys_error(WRITTEN, proven)
end

-- A job whose group's keys hold another type cannot go back to its group. Rather than
-- failing every dequeue until the keys are repaired, it becomes a dead letter with its
-- record intact (replayable once they are), the reason naming the key.
local function bury(id, r, now, problem)
  set_reason(id, {reason = 'corrupt_group', at = now, message = problem})
  redis.call('ZREM', K_DELAYED, id)
  kill(id, r, now)
  count('corrupt', 1)
end

-- Leases that ran out: the holder is presumed dead. The attempt it used counts; once
-- attempts are exhausted the job is dead-lettered, so a job that kills its workers
-- cannot loop forever.
-- `ids`: the active jobs whose lease ran out by `now` (at most RECLAIM_MAX). Returns how
-- many it reclaimed and whether it stopped early (its budget spent: the rest next call).
local function reclaim(now, ids)
  for i = 1, #ids do
    if i > 1 and budget_spent() then return i - 1, true end
    local id = ids[i]
    local r = rec_decode(redis.call('HGET', K_JOBS, id))
    local problem = r and r.state == ST_ACTIVE and group_error(r.group)
    if not r or r.state ~= ST_ACTIVE then
      quarantine(id, now, 'active')
    elseif bit.band(r.flags, FLAG_CANCEL) ~= 0 then
      control().end_cancelled(id, r, now) -- its cancel was asked: never retried
    elseif problem then
      bury(id, r, now, problem)
    else
      set_reason(id, {reason = 'lease_expired', at = now, attempt = r.attempts,
        message = 'the lease ran out before the job was released: worker lost or stalled'})
      if r.attempts >= r.max then
        kill(id, r, now)
      else
        drop_slot(r)
        make_ready(id, r, true)
        redis.call('ZREM', K_ACTIVE, id)
      end
      count('reclaimed', 1)
    end
  end
  return #ids, false
end

-- `ids`: delayed jobs due by `now` (at most PROMOTE_SLICE); `done`: how many this call
-- promoted before (the first of the call is promoted whatever the budget). Returns how
-- many it promoted and whether it stopped early (its budget spent).
local function promote(now, ids, done)
  if #ids == 0 then return 0, false end
  local raws = redis.call('HMGET', K_JOBS, unpack(ids))
  local gone = {} -- made ready: they leave K_DELAYED in one ZREM
  local checked = {} -- group -> its problem, or false
  local stopped = false
  local n = 0
  for i = 1, #ids do
    -- the clock is read every 8 jobs: a promotion costs several reads (docs/decisions/)
    if (done + i) % 8 == 1 and done + i > 1 and budget_spent() then
      stopped = true
      break
    end
    n = i
    local r = rec_decode(raws[i])
    if r and r.state == ST_DELAYED and bit.band(r.flags, FLAG_CONTROL) ~= 0
        and control().expired(ids[i], r, now, control().get(ids[i])) then
      redis.call('ZREM', K_DELAYED, ids[i])
    elseif r and r.state == ST_DELAYED then
      if checked[r.group] == nil then checked[r.group] = group_error(r.group) or false end
      if checked[r.group] then
        bury(ids[i], r, now, checked[r.group])
      else
        local returning = rec_returning(r)
        drop_slot(r)
        make_ready(ids[i], r, returning)
        gone[#gone + 1] = ids[i]
      end
    else
      quarantine(ids[i], now, 'delayed')
    end
  end
  if #gone > 0 then redis.call('ZREM', K_DELAYED, unpack(gone)) end
  return n, stopped
end

local budget = SKIP_MAX
-- the batch mode (ARGV[4]): slot: a group's items hold one slot; one: one group per call;
-- only: the group of a top-up; slotted: groups whose slot this call's batch took
local batch = {mode = ARGV[4] or '', only = ARGV[5], slotted = {},
  slot = (ARGV[4] or '') ~= '', one = ARGV[4] == 'g'}
local handed_ids = {} -- an id listed twice (garbage) is handed out once
-- whether a workflow that ended early is stopping steps of this queue (lib/workflows/stop.lua):
-- one EXISTS per call that pops jobs, read when the first one is popped
local stopping = nil

-- The dedup keys of started jobs, `keyed` = {key, id, ...}: each is freed if its job
-- still holds it, with one HMGET and one HDEL for all (pcall: garbage in K_KEYS must not
-- stop the jobs; they are handed out, their keys stay taken).
local function free_keys(keyed)
  local keys = {}
  for i = 1, #keyed, 2 do keys[#keys + 1] = keyed[i] end
  local holders = redis.pcall('HMGET', K_KEYS, unpack(keys))
  if holders.err then return end
  local freed = {}
  for i = 1, #keys do
    if holders[i] == keyed[2 * i] then freed[#freed + 1] = keys[i] end
  end
  if #freed > 0 then redis.pcall('HDEL', K_KEYS, unpack(freed)) end
end

-- Turn popped ids of group g into handed-out jobs; returns how many were valid.
local function take(g, ids, now, deadline, out, hargs, zargs, counted)
  local WF_STOP_COST = 20 -- a guarded workflow step (lib/workflows/stop.lua) counts as this many
  local byte, sub = string.byte, string.sub
  local raws = redis.call('HMGET', K_JOBS, unpack(ids))
  local got = 0
  local keyed = {} -- {key, id, ...} of the plain jobs started with a dedup key
  local nh, no = #hargs, #out -- their lengths, kept as they grow
  -- a started record's first 26 bytes (version to dequeued_at, lib/core/record_layout.lua)
  -- are its first 20 as started (state, attempts and deliveries) and `now`: made once
  -- for a run of items whose first 20 bytes are equal (enqueued together), as the
  -- previous item's (`head`, `started`)
  local now6 = struct.pack('>I6', now)
  local head, started = nil, nil
  for i = 1, #ids do
    local id = ids[i]
    local raw = raws[i]
    -- the common job (pending, no job control) is handed out from its header's bytes
    -- without rec_decode's table and copies, nor a whole header's unpack and pack:
    -- `pending` as rec_peek (lib/core/record_peek.lua) checks a valid record
    local pending, flags, kpos, klen = false, nil, nil, nil
    if raw then
      local ver, state = byte(raw, 1, 2)
      local glen
      flags, glen = byte(raw, REC_FIXED, REC_FIXED + 1)
      if ver == REC_VERSION and state == ST_PENDING and glen then
        kpos = REC_FIXED + 2 + glen
        klen = byte(raw, kpos)
        pending = klen ~= nil and kpos + klen <= #raw
      end
    end
    local stop, wid = nil, nil
    local rec = nil -- the started record of a job handed out
    if pending then
      if stopping == nil then stopping = redis.call('EXISTS', K_PREFIX .. WF_GUARDS) == 1 end
      if stopping then stop, wid = wf_guard(id) end
    end
    if stop and not handed_ids[id] then
      -- a step of a workflow that failed or was cancelled, whose stop has not reached it:
      -- it ends as the stop would end it (a few commands: it counts for WF_STOP_COST)
      handed_ids[id] = true
      budget = budget - WF_STOP_COST
      ready_add(g, -1)
      wf_stop_unstarted(id, rec_decode(raw), now, stop, wid, false)
    elseif pending and flags < FLAG_CANCEL and not handed_ids[id] then
      handed_ids[id] = true
      -- as rec_encode of the record updated below (state, attempts, deliveries, deq)
      local h = sub(raw, 1, 20)
      if h ~= head then
        local _, _, prio, codec, attempts, maxatt, deliveries, failures, enq =
          struct.unpack('>BBbBHHIHI6', h)
        head = h
        started = struct.pack('>BBbBHHIHI6', REC_VERSION, ST_ACTIVE, prio, codec,
          attempts + 1, maxatt, deliveries + 1, failures, enq) .. now6
      end
      if counted and (got == 0 or not batch.slot) and flags < FLAG_SLOT then
        -- (flags below FLAG_CANCEL: from FLAG_SLOT up, the slot's flag is set already)
        rec = started .. sub(raw, 27, REC_FIXED - 1) .. string.char(flags + FLAG_SLOT)
          .. sub(raw, REC_FIXED + 1)
      else
        rec = started .. sub(raw, 27)
      end
      if klen > 0 then -- the key is free once its job started: freed below, in one go
        keyed[#keyed + 1] = sub(raw, kpos + 1, kpos + klen)
        keyed[#keyed + 1] = id
      end
    else
      local r = rec_decode(raw)
      local ok = r and r.state == ST_PENDING and not handed_ids[id]
      local c = nil -- job control data (lib/control/job_control.lua), of a flagged job only
      if ok and r.flags >= FLAG_CANCEL and bit.band(r.flags, FLAG_CONTROL) ~= 0 then
        c = control().get(id)
        if control().expired(id, r, now, c) then
          handed_ids[id] = true -- listed twice (garbage): skipped the second time
          ready_add(g, -1)
          ok = false
        end
      end
      if ok then
        handed_ids[id] = true
        r.state = ST_ACTIVE
        r.attempts = r.attempts + 1
        r.deliveries = r.deliveries + 1
        r.deq = now
        if counted and (got == 0 or not batch.slot) then r.flags = bit.bor(r.flags, FLAG_SLOT) end
        rec = rec_encode(r)
        -- the key is free once its job started, except a keep-last job's: it holds the key
        -- until it ends, so that the next enqueue waits for it
        if r.key ~= '' and not (c and c.m == 'keep')
            and redis.pcall('HGET', K_KEYS, r.key) == id then
          redis.pcall('HDEL', K_KEYS, r.key)
        end
      else
        budget = budget - 1
        -- past 20 of them, the call's upkeep budget spent: the rest of this turn, then stop
        if budget < SKIP_MAX - 20 and budget > 0 and budget_spent() then budget = 0 end
        -- (the same id again, handed_ids: its record is not committed yet, skip it)
        if not handed_ids[id] then
          if r and r.state == ST_SUPERSEDED then
            redis.call('HDEL', K_JOBS, id)
            redis.call('HDEL', K_REASONS, id)
            if bit.band(r.flags, FLAG_CONTROL) ~= 0 then
              control().finish(id, r, now, 'released')
            end
            -- its id stays taken as if it had been released (see lib/core/enqueue_one.lua)
            local window_end = r.enq + get_conf().dedup_window
            if window_end > now then redis.call('ZADD', K_DONE, window_end, id) end
          elseif r and r.state == ST_CANCELLED then
            -- cancelled while listed (cancel.lua): its record is kept for the dedup window
            redis.call('ZADD', K_DONE, now + get_conf().dedup_window, id)
          elseif raws[i] and not r then
            quarantine(id, now, 'ready')
            ready_add(g, -1)
          end
        end
      end
    end
    if rec then -- written in commit(), and handed out
      hargs[nh + 1] = id
      hargs[nh + 2] = rec
      zargs[nh + 1] = deadline
      zargs[nh + 2] = id
      nh = nh + 2
      out[no + 1] = id
      out[no + 2] = rec
      no = no + 2
      got = got + 1
    end
  end
  if #keyed > 0 then free_keys(keyed) end
  if got > 0 then
    ready_add(g, -got)
    if counted and batch.slot then
      batch.slotted[g] = true -- a batch holds one slot of the group, whatever its items
      slot_add(g, 1)
    elseif counted then
      slot_add(g, got)
    end
  end
  return got
end

local function commit(hargs, zargs)
  local HSET_CHUNK = 500  -- field/value pairs per HSET (Lua unpack limits)
  for i = 1, #hargs, 2 * HSET_CHUNK do
    redis.call('HSET', K_JOBS, unpack(hargs, i, math.min(i + 2 * HSET_CHUNK - 1, #hargs)))
  end
  for i = 1, #zargs, 2 * HSET_CHUNK do
    redis.call('ZADD', K_ACTIVE, unpack(zargs, i, math.min(i + 2 * HSET_CHUNK - 1, #zargs)))
  end
end

-- Limits and weights are read per group only when some are configured. Returns an
-- error reply (nil: none), whether limits (lib/groups/slots.lua), weights and priorities are
-- used. Its reads are typed: made before the first write, they prove their keys' types
-- (noted in `typed`, the call's `proven`).
local function group_settings(typed)
  local err, n = read(K_GWEIGHT, 'hash', 'HLEN', K_GWEIGHT)
  if err then return err end
  local weighted = n > 0
  -- a queue that never had a prioritized job has no priority zsets to look at (the
  -- sequence of priorities, lib/groups/push.lua, exists once one was pushed); read with
  -- the settings, in one HMGET
  local conf, seq
  err, conf, seq = read_by(K_CONF, 'hash', get_conf_and, 'seq')
  if err then return err end
  local prioritized = seq ~= false
  local limited = conf.group_limit > 0 -- or a group's own limit, its HLEN typed
  if not limited then
    err, n = read(K_GLIMIT, 'hash', 'HLEN', K_GLIMIT)
    if err then return err end
    limited = n > 0
    typed.glimit = true
  end
  typed.gweight, typed.conf = true, true
  return nil, limited, weighted, prioritized
end

local function free_slots(g, want)
  local lim = tonumber(redis.call('HGET', K_GLIMIT, g)) or get_conf().group_limit
  if lim <= 0 then return want end
  local free = lim - (tonumber(redis.call('HGET', K_GACTIVE, g)) or 0)
  if free < want then return math.max(free, 0) end
  return want
end

-- One turn of group g: take up to `quota` jobs. Returns how many were handed out,
-- whether the group still has ready jobs, whether its keys hold another type (garbage
-- written by something else: such a group keeps its place in the rotation, skipped, so
-- its jobs flow again once the key is removed), and whether it found prioritized jobs
-- although group_settings said there were none.
local function turn(g, quota, limited, prioritized, now, deadline, out, hargs, zargs)
  -- a batch's group takes one slot (a top-up's batch holds it already): one free is enough
  local counted = limited and g ~= '' and batch.mode ~= 't' and not batch.slotted[g]
  if counted and batch.slot then
    if free_slots(g, 1) <= 0 then quota = 0 end
  elseif counted then
    quota = free_slots(g, quota)
  end
  if quota <= 0 then return 0, false end
  if flow_ctl then
    quota = flow_ctl.group_quota(g, quota, now, batch.mode == 't')
    if quota <= 0 then return 0, false, false, false, true end -- parked: over its rate
  end
  local prio = 0
  if prioritized then
    prio = redis.pcall('ZCARD', ready_prio(g))
    if type(prio) ~= 'number' then return 0, true, true end
  end
  local ids, garbage
  local scored = 0 -- ids taken from the priority zset (the others came from the list)
  if prio == 0 then
    ids = redis.pcall('LPOP', ready_list(g), quota)
    if type(ids) == 'table' and ids.err then return 0, true, true end
    if not ids then ids = {} end
  else
    ids, garbage, scored = group_pop(g, quota)
  end
  local got = 0
  if #ids > 0 then got = take(g, ids, now, deadline, out, hargs, zargs, counted) end
  if flow_ctl then flow_ctl.group_started(g, got, now) end
  if garbage then return got, true, true end
  -- prioritized jobs are left when the zset held more than was taken from it (ids taken
  -- from the default list leave the lower priorities waiting behind them)
  local more = prio > scored
  if not more and #ids == quota then
    local left = redis.pcall('LLEN', ready_list(g)) -- pcall: the list may be garbage
    more = type(left) == 'number' and left > 0
  end
  if not more and not prioritized then
    -- about to drop the group. If it still has prioritized jobs, the marker read by
    -- group_settings was lost (its hash deleted): restore it and keep the group listed
    local left_prio = redis.pcall('ZCARD', ready_prio(g))
    if type(left_prio) == 'number' and left_prio > 0 then
      if redis.call('HEXISTS', K_CONF, 'seq') == 0 then redis.call('HSET', K_CONF, 'seq', now) end
      return got, true, false, true
    end
  end
  if more and counted and not batch.slot then more = free_slots(g, 1) > 0 end
  if flow_ctl and batch.mode ~= 't' and flow_ctl.group_parked(g, more, now) then
    return got, false, false, false, true -- parked: more ready, but its rate is spent
  end
  return got, more, false, false
end

-- Serve up to `want` jobs; `listed` is the length of K_RR read before, the settings
-- those of group_settings. Returns how many were handed out, the length of K_RR after
-- (nil under flow control, whose parking moves groups in and out of K_RR), and whether
-- the call stopped short of `want` for its budget (SERVE_MIN, SERVE_MS) with groups left.
local function serve(want, now, deadline, out, listed, limited, weighted, prioritized)
  -- (constants of this function, not of the script: its main function is near Lua's 200
  -- locals) a turn hands out TURN_MAX jobs at most (a sole group takes several turns);
  -- past SERVE_MIN jobs handed out, serving stops once the call has run SERVE_MS
  -- (lib/core/budget.lua), the clock read every 4 turns or SERVE_CHECK jobs
  local TURN_MAX, SERVE_MIN, SERVE_MS, SERVE_CHECK = 100, 50, 1, 25
  local hargs, zargs = {}, {}
  local handed = 0
  local skipped = 0 -- groups skipped in a row
  local turns, cut, check_at = 0, false, SERVE_MIN
  if batch.mode == 't' then
    -- a top-up of a batch of one group: that group's turns only, outside the rotation
    local more = true
    while more and handed < want and not cut do
      local got, m, garbage, restored = turn(batch.only, math.min(want - handed, TURN_MAX),
        limited, prioritized, now, deadline, out, hargs, zargs)
      if restored then prioritized = true end
      handed = handed + got
      more = m and not garbage and budget > 0 -- past a turn of stale ids (see by_group below)
      if more and handed >= check_at then
        check_at = handed + SERVE_CHECK
        cut = budget_spent(SERVE_MS)
      end
    end
    commit(hargs, zargs)
    return handed, nil, cut
  end
  while handed < want and budget > 0 and not cut and not (batch.one and handed > 0) do
    listed = listed or redis.call('LLEN', K_RR)
    if listed == 0 and redis.call('TYPE', K_RRSET)['ok'] ~= 'none'
        and not (flow_ctl and flow_ctl.only_parked_listed()) then
      -- K_RRSET (not empty, as it exists) lists the members of K_RR, so something else
      -- deleted K_RR: without a repair, the groups it listed would never be offered again
      redis.call('DEL', K_RRSET)
      if flow_ctl then flow_ctl.relist_parked() end
      -- the default group and the 1000 largest named groups with ready jobs are offered
      -- again, in a few variadic commands (group_offer's seven each would be too slow);
      -- parked groups stay parked (relist_parked put them in K_RRSET first)
      group_offer('')
      local named = redis.pcall('ZREVRANGE', K_GROUPS, 0, 999)
      if type(named) == 'table' and #named > 0 then
        local known = redis.call('SMISMEMBER', K_RRSET, unpack(named))
        local limits = redis.call('HMGET', K_GLIMIT, unpack(named))
        local slots = redis.call('HMGET', K_GACTIVE, unpack(named))
        local add = {}
        for i = 1, #named do
          local lim = tonumber(limits[i]) or get_conf().group_limit
          if known[i] == 0 and (lim <= 0 or (tonumber(slots[i]) or 0) < lim) then
            add[#add + 1] = named[i]
          end
        end
        if #add > 0 then
          redis.call('RPUSH', K_RR, unpack(add))
          redis.call('SADD', K_RRSET, unpack(add))
          need_wake = true
        end
      end
      listed = redis.call('LLEN', K_RR)
    end
    if listed == 0 then break end
    local sole = listed == 1 or batch.one -- a batch of one group takes what it is asked
    local groups = redis.call('LPOP', K_RR, batch.one and 1 or math.min(listed, want - handed))
    local keep, drop, front = {}, {}, {}
    for i = 1, #groups do
      local g = groups[i]
      -- (a job or a turn costs a few reads of the clock: docs/decisions/script-costs.md)
      if not cut and (handed >= check_at or (handed >= SERVE_MIN and turns % 4 == 3)) then
        check_at = handed + SERVE_CHECK
        cut = budget_spent(SERVE_MS)
      end
      if handed >= want or cut then
        front[#front + 1] = g -- not served this call: keeps its place at the head
      else
        turns = turns + 1
        local quota = math.min(want - handed, TURN_MAX)
        if not sole then
          local w = 1
          if weighted and g ~= '' then w = tonumber(redis.call('HGET', K_GWEIGHT, g)) or 1 end
          -- a weight below 1 (configure refuses it; one stored before it did) counts as
          -- 1: a turn of 0 jobs would drop the group from the rotation with jobs ready
          if w < 1 then w = 1 end
          if w < quota then quota = w end
        end
        local got, more, garbage, restored, parked = turn(g, quota, limited, prioritized,
          now, deadline, out, hargs, zargs)
        if restored then prioritized = true end
        handed = handed + got
        -- a batch of one group: that group's turns go on while it has more, in this call,
        -- past a turn that met only stale ids (cancelled, guarded: bounded by the skip
        -- budget); stopping there would pass the group's turn on with its jobs ready
        while batch.one and more and not garbage and budget > 0 and handed < want
            and not cut do
          if handed >= check_at then
            check_at = handed + SERVE_CHECK
            cut = budget_spent(SERVE_MS)
          end
          if not cut then
            got, more, garbage, restored, parked = turn(g, math.min(want - handed, TURN_MAX),
              limited, prioritized, now, deadline, out, hargs, zargs)
            if restored then prioritized = true end
            handed = handed + got
          end
        end
        if garbage then skipped = skipped + 1 else skipped = 0 end
        if more then keep[#keep + 1] = g elseif not parked then drop[#drop + 1] = g end
      end
    end
    if #front > 0 then -- back at the head, in their order
      local back = {}
      for j = #front, 1, -1 do back[#back + 1] = front[j] end
      redis.call('LPUSH', K_RR, unpack(back))
    end
    if #keep > 0 then redis.call('RPUSH', K_RR, unpack(keep)) end
    if #drop > 0 then redis.call('SREM', K_RRSET, unpack(drop)) end
    local served = listed
    if flow_ctl then
      listed = nil -- read again: parking moves groups in and out of K_RR
    else
      -- nothing else in this call changes K_RR: its length is known without a read
      -- (two commands fewer per call that empties it; the repair above needed only the
      -- first read)
      listed = listed - #groups + #front + #keep
    end
    if skipped >= served or listed == 0 then break end -- all skipped, or none left
  end
  commit(hargs, zargs)
  if flow_ctl then return handed, nil, cut end
  return handed, listed, cut
end

local function next_ms(now)
  local nxt = -1
  local d = redis.call('ZRANGE', K_DELAYED, 0, 0, 'WITHSCORES')
  if d[2] then nxt = math.max(0, tonumber(d[2]) - now) end
  local a = redis.call('ZRANGE', K_ACTIVE, 0, 0, 'WITHSCORES')
  if a[2] then
    local t = math.max(0, tonumber(a[2]) - now)
    if nxt < 0 or t < nxt then nxt = t end
  end
  return nxt
end

local want = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
local problem = flow_prepare()
if problem then return wrongtype(problem) end
-- no write before guard() (see WRITTEN): each step below calls it before its first
local now = now_ms()
budget_spent() -- starts the clock: the upkeep below stops once the call used its budget
local err, ids = read(K_ACTIVE, 'zset', 'ZRANGEBYSCORE', K_ACTIVE, '-inf', now, 'LIMIT', 0,
  RECLAIM_MAX)
if err then return err end
proven.active = true
problem = #ids > 0 and guard()
if problem then return wrongtype(problem) end
local reclaimed, left = reclaim(now, ids)
left = left or reclaimed == RECLAIM_MAX
err, ids = read(K_DELAYED, 'zset', 'ZRANGEBYSCORE', K_DELAYED, '-inf', now, 'LIMIT', 0,
  PROMOTE_SLICE)
if err then return err end
proven.delayed = true
problem = #ids > 0 and guard()
if problem then return wrongtype(problem) end
local promoted = 0
while true do
  local n, stopped = promote(now, ids, promoted)
  promoted = promoted + n
  if stopped or #ids < PROMOTE_SLICE then
    left = left or stopped
    break
  end
  if promoted >= 1000 or budget_spent() then -- PROMOTE_MAX
    left = true
    break
  end
  ids = redis.call('ZRANGEBYSCORE', K_DELAYED, '-inf', now, 'LIMIT', 0, PROMOTE_SLICE)
end
do -- (a block: the main function is at Lua's 200 locals)
  local ticks_left
  ticks_left, problem = schedules_due(now, guard) -- periodic schedules (lib/schedules/due.lua)
  if problem then return wrongtype(problem) end
  left = left or ticks_left
end
offer_touched() -- groups touched above, after the guard
local listed, limited, weighted, prioritized
err, limited, weighted, prioritized = group_settings(proven)
if err then return err end
err, listed = read(K_RR, 'list', 'LLEN', K_RR)
if err then return err end
proven.rr = true
problem = guard()
if problem then return wrongtype(problem) end
local deadline = now + lease
local out = {now, deadline, -1, reclaimed}
if flow_ctl then
  want = flow_ctl.begin(now, want) -- what the queue's limits allow now
  -- begin relists the groups whose parking ended: the length read before is stale
  -- (serve would take the group at the head for the only one eligible, and hand it
  -- everything asked past its weight and the others' turns)
  listed = nil
end
-- (the deadline goes to serve as the string each item's ZADD takes: made once, not once
-- per item)
local handed, listed_after, cut = serve(want, now, tostring(deadline), out, listed, limited,
  weighted, prioritized)
left = left or budget <= 0 or cut
if left then
  -- upkeep (or stale ids) left for the next call: this consumer comes back at once, and
  -- another idle one is woken in case this one has no free slot
  out[3] = 0
  need_wake = true
elseif handed == 0 then
  out[3] = schedules_next(now, next_ms(now))
end
if flow_ctl then out[3] = flow_ctl.finish(now, handed, out[3], ARGV[3] or '') end
-- idle consumers: a lease that becomes the earliest wakes one (lib/core/idlers.lua)
idlers_after(now, ARGV[3] or '', handed, deadline, out[3])
expire_done(now, 100) -- EXPIRE_MAX
flush_counters()
-- more groups are eligible: wake another consumer (only after progress, so that a
-- skipped group cannot keep idle consumers spinning)
if handed > 0 and not (flow_ctl and flow_ctl.blocked())
    and (listed_after or redis.call('LLEN', K_RR)) > 0 then
  need_wake = true
elseif handed == 0 and batch.mode == 't' and redis.call('LLEN', K_RR) > 0 then
  -- the wake-up that ended this top-up's wait may have been for another group: pass it on
  need_wake = true
end
wake_if_needed()
return out
