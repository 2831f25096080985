--[[ settle: the outcomes of a batch's items (durq.Batch), each fenced by its own lease token.
One call ends every item of a batch whichever way it went: done (as release.lua, the
record deleted, its id kept taken for the dedup window, its result stored), failed (as
requeue.lua: back after its delay to the head of its group, or dead-lettered with its
reason once its attempts are spent or when asked), deferred (as defer.lua: the attempt
given back) or given back by RateLimited (as rate_limited.lua: the attempt given back, the
item's scope paused). An item whose token is stale is refused alone (LEASE_LOST): the
others are settled. The first call of a batch also records its size in the queue's batch
history (<prefix>batches, the newest 100 batches, for the dashboard).
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  result_ttl_ms: how long the results given below are kept
ARGV[2]  size: the batch's size, recorded in the history (0: no record, e.g. a later call
         of a batch larger than a call takes)
ARGV[3]  cause: why the batch started, 'size' (max_size items) or 'wait' (max_wait)
ARGV[4]  m: the number of other shards of the queue (0: a plain queue, or no item pauses
         the queue); ARGV[5 .. m+4] their prefixes
ARGV[m+5]  n: the number of items; then six parallel arrays of n values each:
         ids, lease tokens, outcomes, delays (ms), reasons (JSON, '' = none), results
         ('' = none). -n: n items, every one done without a result, and only the first
         two arrays (ids, lease tokens): the common batch, in a third of the arguments.
         An outcome is 'd' done (result stored), 'r' retry after the delay
         (dead-lettered when its attempts are spent; its result then stored, as
         requeue.lua's), 'x' dead-letter now, 'f' defer for the delay, 'g' or 'q' given
         back by RateLimited, pausing its group or the queue for the delay.
Returns  {status_1, ..., status_n}: OK (done, deferred, given back), RETRYING, DEAD,
         CANCELLED (a cancel was asked while the batch ran: the item ends cancelled, its
         scope still paused for 'g'/'q'), LEASE_LOST (the lease expired and the item was
         handed out again, it finished, or it is listed twice), NOT_FOUND, CORRUPT.
         A refused item changes nothing.
Effects  under a max_active (flow control) one idle consumer is woken for the places freed.
         Items are not workflow steps (a batch task cannot be one): a link is ignored.
Errors   DURQ_ARG for an unknown outcome; DURQ_WRONGTYPE when a durq key the call uses
         holds another Redis type (the groups items go back to included, the flow keys
         when an item pauses, the outbox's when m > 0); both before any change
Memory   runs while the server is at maxmemory, as an acknowledgement must
         (lib/core/frees_memory.lua)
Cost     O(n) commands: done items as release.lua's (a few variadic commands for all;
         their reasons deleted only where the queue has any), the others about as
         requeue.lua's per item; 16 TYPE checks, 2 for the history.
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
--- @include "lib/core/dead_letter"
--- @include "lib/core/send_back"
--- @include "lib/control/job_control"
--- @include "lib/core/types"
--- @include "lib/limits/active_cap"
--- @include "lib/limits/conf"
--- @include "lib/limits/queue_pause"
--- @include "lib/limits/scope_pause"

local HISTORY = 100 -- batches kept in <prefix>batches
local OUTCOMES = {d = true, r = true, x = true, f = true, g = true, q = true}

-- (The work is in functions of few upvalues each: one body holding all of it would
-- capture more than the 60 upvalues a Lua function may have, lua/functions.py.)

-- The call's arguments and what it builds up, in one table.
local function settle_args()
  local m = tonumber(ARGV[4])
  local n = tonumber(ARGV[m + 5])
  local I = m + 5 -- ARGV[I + c*n + i]: column c (0 ids ... 5 results) of item i
  local all_done = n < 0 -- only ids and tokens: every item done, without a result
  if all_done then n = -n end
  return {
    all_done = all_done,
    result_ttl = tonumber(ARGV[1]), size = tonumber(ARGV[2]), cause = ARGV[3],
    others = {unpack(ARGV, 5, m + 4)}, -- the other shards' prefixes
    n = n, I = I, ids = {unpack(ARGV, I + 1, I + n)}, raws = {}, pauses = false,
    out = {}, seen = {}, missing = false, left = 0,
    -- the done items' writes, made once for all (as release.lua's)
    gone = {}, tombs = {}, results = {}, ngone = 0, ntombs = 0, -- (the lengths, as they grow)
    -- the previous item's header bytes from deliveries to dequeued_at, its token and
    -- enqueued_at (settle_item); the call's time and dedup window
    head = false, token = false, enq = 0, now = 0, window = 0,
    -- memos: a batch's items mostly share their dequeue time and often their enqueue
    -- time, so a token (by dequeued_at, then deliveries) or a tombstone's score (by
    -- enqueued_at) is made into a string once per call, not once per item
    tokens = {}, scores = {},
    freed = {}, -- group -> slots given back by done items, applied once per group
    controlled = nil, -- {id, record} of done items with job control, finished at the end
  }
end

-- Before any change: an error reply for an unknown outcome or a key of another type.
local function settle_check(st)
  local I, n = st.I, st.n
  for i = 1, st.all_done and 0 or n do
    local kind = ARGV[I + 2 * n + i]
    if not OUTCOMES[kind] then
      return redis.error_reply('DURQ_ARG unknown outcome ' .. tostring(kind) ..
        ': use d, r, x, f, g or q')
    end
    if kind == 'g' or kind == 'q' then st.pauses = true end
  end
  local problem = keys_error({'jobs', 'done', 'reasons', 'dead', 'active', 'delayed', 'conf',
    'gactive', 'glimit', 'rr', 'rrset', 'keys', 'ctl', 'progress'})
  if not problem and st.size > 0 then problem = type_error(K_PREFIX .. 'batches', 'list') end
  if not problem and st.pauses then problem = flow_error(true) end
  if not problem and #st.others > 0 then problem = queue_pause_outbox_error() end
  if n > 0 then st.raws = redis.call('HMGET', K_JOBS, unpack(st.ids)) end
  -- an item that goes back to its group now: that group's keys must hold their types too
  for i = 1, st.all_done and 0 or n do
    if problem then break end
    local kind = ARGV[I + 2 * n + i]
    if kind ~= 'd' and kind ~= 'x' and (kind == 'g' or kind == 'q'
        or tonumber(ARGV[I + 3 * n + i]) == 0) then
      local r = rec_decode(st.raws[i])
      if r then problem = group_error(r.group) end
    end
  end
  if problem then return wrongtype(problem) end
  return nil
end

-- A done item, as release.lua ends it: deleted (its id kept taken by a tombstone for
-- the dedup window), its result stored, its slot given back; `r` is its decoded record
-- when it has job control (finished at the end), else nil.
local function settle_done(st, i, id, enq, g, slot, r)
  local n = st.n
  local k = st.ngone + 1
  st.gone[k] = id
  st.ngone = k
  if enq + st.window > st.now then
    local score = st.scores[enq]
    if not score then
      score = tostring(enq + st.window)
      st.scores[enq] = score
    end
    k = st.ntombs
    st.tombs[k + 1] = score
    st.tombs[k + 2] = id
    st.ntombs = k + 2
  end
  local result = st.all_done and '' or ARGV[st.I + 5 * n + i]
  if result ~= '' then
    st.results[#st.results + 1] = id
    st.results[#st.results + 1] = result
  end
  if slot then
    st.freed[g] = (st.freed[g] or 0) + 1
    touch(g) -- a freed slot can make the group eligible again
  end
  if r then
    st.controlled = st.controlled or {}
    st.controlled[#st.controlled + 1] = {id, r}
  end
end

-- Any other outcome, or a done item whose cancel was asked or that has job control.
-- Returns its status.
local function settle_other(st, i, id, kind, raw)
  local n, now = st.n, st.now
  local r = rec_decode(raw)
  local delay = st.all_done and 0 or tonumber(ARGV[st.I + 3 * n + i])
  if (kind == 'g' or kind == 'q') and delay > 0 then
    -- the upstream's answer holds whatever became of the item: its scope pauses
    scope_pause(get_flow(), kind == 'q' and 'queue' or 'group', r.group, now, delay, st.others)
  end
  if ends_cancelled(id, r, now) then return S_CANCELLED end -- its cancel was asked
  if kind == 'd' then -- done, with job control
    settle_done(st, i, id, r.enq, r.group, rec_has_slot(r), r)
    return S_OK
  end
  if kind == 'r' or kind == 'x' then -- failed: as requeue.lua
    r.failures = r.failures + 1
    r.req = now
    redis.call('HSET', K_REASONS, id, ARGV[st.I + 4 * n + i])
    count('failed', 1)
    if kind == 'x' or r.attempts >= r.max then
      kill(id, r, now)
      local result = ARGV[st.I + 5 * n + i]
      if result ~= '' then store_result(id, result, st.result_ttl) end
      return S_DEAD
    end
    send_back(id, r, delay, now)
    count('retried', 1)
    return S_RETRYING
  end
  -- deferred, or given back by RateLimited: the attempt is given back
  if r.attempts > 0 then r.attempts = r.attempts - 1 end
  if kind == 'f' then
    send_back(id, r, delay, now)
    count('deferred', 1)
  else
    send_back(id, r, 0, now)
    count('rate_limited', 1)
  end
  return S_OK
end

-- The lease token of a record delivered `deliveries` times, last at `deq` (memoized).
local function token_of(st, deliveries, deq)
  local by = st.tokens[deq]
  if not by then
    by = {}
    st.tokens[deq] = by
  end
  local token = by[deliveries]
  if not token then
    token = rec_token_of(deliveries, deq)
    by[deliveries] = token
  end
  return token
end

-- Item i: its status, fenced by its token.
local function settle_item(st, i)
  local n = st.n
  local id = st.ids[i]
  local kind = st.all_done and 'd' or ARGV[st.I + 2 * n + i]
  local raw = st.raws[i]
  if not raw then
    st.missing = true
    return S_NOT_FOUND
  end
  -- an active record is read from its header's bytes (rec_peek's checks, for the others:
  -- lib/core/record_peek.lua)
  local byte = string.byte
  local ver, state = byte(raw, 1, 2)
  local flags, glen = byte(raw, REC_FIXED, REC_FIXED + 1)
  local kpos = glen and REC_FIXED + 2 + glen
  local klen = kpos and byte(raw, kpos)
  if ver ~= REC_VERSION or state ~= ST_ACTIVE or not klen or kpos + klen > #raw then
    if not rec_peek(raw) then return S_CORRUPT end
    return S_LEASE_LOST
  end
  -- deliveries, failures, enqueued_at, dequeued_at: the token and the tombstone's score
  -- are those of the previous item when these bytes are (a batch's items share them)
  local head = string.sub(raw, 9, 26)
  if head ~= st.head then
    local deliveries, _, enq, deq = struct.unpack('>IHI6I6', head)
    st.head, st.token, st.enq = head, token_of(st, deliveries, deq), enq
  end
  if st.token ~= ARGV[st.I + n + i] or st.seen[id] then return S_LEASE_LOST end
  local enq = st.enq
  st.seen[id] = true
  st.left = st.left + 1
  if kind == 'd' and flags < FLAG_CANCEL then -- the common item: release.lua's path
    -- (flags below FLAG_CANCEL: FLAG_SLOT is set when they reach it; the group is read
    -- only then)
    local slot = flags >= FLAG_SLOT
    settle_done(st, i, id, enq, slot and string.sub(raw, REC_FIXED + 2, kpos - 1), slot, nil)
    return S_OK
  end
  return settle_other(st, i, id, kind, raw)
end

-- The done items' writes, the history, and the call's bookkeeping.
local function settle_end(st)
  local now = st.now
  store_results(st.results, st.result_ttl)
  if #st.gone > 0 then
    -- the tombstone goes first: from the moment the record is gone its id stays taken
    if #st.tombs > 0 then redis.call('ZADD', K_DONE, unpack(st.tombs)) end
    redis.call('HDEL', K_JOBS, unpack(st.gone))
    -- a queue none of whose jobs has a reason (none failed, was reclaimed or held) has
    -- no reasons hash: one EXISTS rather than an HDEL of every id
    if redis.call('EXISTS', K_REASONS) == 1 then
      redis.call('HDEL', K_REASONS, unpack(st.gone))
    end
    redis.call('ZREM', K_ACTIVE, unpack(st.gone))
    for g, k in pairs(st.freed) do slot_add(g, -k) end
    count('completed', #st.gone)
  end
  if st.controlled then
    for _, item in ipairs(st.controlled) do control().finish(item[1], item[2], now, 'released') end
  end
  if st.missing then
    -- a finished item leaves a tombstone: its late holder lost the lease, the id is known
    for i = 1, st.n do
      if st.out[i] == S_NOT_FOUND and redis.call('ZSCORE', K_DONE, st.ids[i]) then
        st.out[i] = S_LEASE_LOST
      end
    end
  end
  if st.size > 0 then
    local hk = K_PREFIX .. 'batches'
    redis.call('LPUSH', hk, now .. ':' .. st.size .. ':' .. st.cause)
    redis.call('LTRIM', hk, 0, HISTORY - 1)
  end
  if st.left > 0 then cap_freed() end
  expire_done(now, 2 * st.n + 10)
  offer_touched()
  flush_counters()
  wake_if_needed()
  return st.out
end

local st = settle_args()
local problem = settle_check(st)
if problem then return problem end
st.now = now_ms()
st.window = get_conf().dedup_window
for i = 1, st.n do st.out[i] = settle_item(st, i) end
return settle_end(st)
