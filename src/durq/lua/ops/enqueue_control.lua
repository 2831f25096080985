--[[ enqueue_control: enqueue jobs that use job control: an expiry time, or a dedup mode
beyond key/replace. The client picks it when a job of the batch has such an option; the
others of the batch are enqueued as enqueue.lua does.
  throttle   ('thr', window = ttl): one job per key per ttl, counted from the enqueue
             that opened the window (<prefix>thr:<key>, PX ttl): a later enqueue returns
             the job that opened it (DEDUPLICATED), even once that job has finished.
  debounce   ('deb', window = debounce, max_wait): the job starts `debounce` after the
             last enqueue of a burst, with the newest arguments: while the job of the key
             has not started, an enqueue gives it its arguments (UPDATED) and moves its
             due time to now + debounce, but never past its first enqueue + max_wait
             (0: no bound), so a steady stream still runs.
  keep-last  ('keep'): while the job of the key has not started, an enqueue gives it its
             arguments (UPDATED); while it runs (or waits for its next attempt), one
             follow-up waits for it, with the newest arguments (the first such enqueue
             creates it, the next ones update it), and starts when it ends.
A job of the batch with none of these options, and a job whose mode finds nothing to
merge with, is enqueued as enqueue.lua does (its key deduplicates as usual). The job
keeps the options it was created with; UPDATED changes only its arguments.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  n: number of jobs
ARGV[2+15i .. 16+15i], for job i: the nine enqueue fields (see enqueue.lua), then
         expires_in_ms (0: none), expires_at_ms (server epoch ms, 0: none; wins over
         expires_in), mode ('', 'thr', 'deb' or 'keep': needs a key), window_ms (ttl or
         debounce), max_wait_ms (debounce; 0: no bound), result_ttl_ms (how long the
         outcome of an expired job stays for its waiter)
Returns  {status_1, ref_1, ...}: as enqueue.lua, and UPDATED (ref = id of the job that
         takes these arguments)
Errors   DURQ_WRONGTYPE when a key the call would use holds another Redis type: the
         call changes nothing (lib/core/types.lua)
Cost     O(n) commands.
]]
--- @include "lib/core/status"
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/record"
--- @include "lib/core/counters"
--- @include "lib/control/job_control"
--- @include "lib/core/enqueue_one"
--- @include "lib/core/types"

local FIELDS = 15

-- The problem with a key the call may use, found before its first write.
local function problem_of(n)
  local problem = keys_error({'jobs', 'done', 'rr', 'rrset', 'keys', 'reasons', 'delayed',
    'conf', 'glimit', 'gactive', 'ctl'})
  for i = 0, n - 1 do
    local b = 2 + FIELDS * i
    problem = problem or group_error(ARGV[b + 6])
    if ARGV[b + 11] == 'thr' then
      problem = problem or type_error(K_PREFIX .. 'thr:' .. ARGV[b + 7], 'string')
    end
  end
  return problem
end

-- The job `other` has not started: it takes the arguments `payload` (UPDATED).
local function update(other, r, payload, codec)
  r.codec = codec
  r.tail = string.char(#r.group) .. r.group .. string.char(#r.key) .. r.key .. payload
  redis.call('HSET', K_JOBS, other, rec_encode(r))
  count('deduplicated', 1)
end

local function enqueue_control(now, b)
  local id, payload, delay = ARGV[b], ARGV[b + 1], delay_of(ARGV[b + 2], now)
  local codec, key = tonumber(ARGV[b + 5]), ARGV[b + 7]
  local mode, window, max_wait = ARGV[b + 11], tonumber(ARGV[b + 12]), tonumber(ARGV[b + 13])
  local park = nil -- keep-last: the running job this one waits for
  if mode == 'thr' then
    local holder = redis.call('GET', K_PREFIX .. 'thr:' .. key)
    if holder and holder ~= id then
      count('deduplicated', 1)
      return S_DEDUPLICATED, holder
    end
  elseif mode == 'deb' or mode == 'keep' then
    local other = redis.call('HGET', K_KEYS, key)
    local r = other and other ~= id and rec_decode(redis.call('HGET', K_JOBS, other))
    if r and r.deliveries == 0 and (r.state == ST_PENDING or r.state == ST_DELAYED) then
      update(other, r, payload, codec)
      local due = tonumber(redis.call('ZSCORE', K_DELAYED, other))
      if mode == 'deb' and due and due ~= PARKED then
        due = now + window
        if max_wait > 0 then due = math.min(due, r.enq + max_wait) end
        redis.call('ZADD', K_DELAYED, due, other)
      end
      return S_UPDATED, other
    end
    if mode == 'keep' and r and r.deliveries > 0 and (r.state == ST_ACTIVE
        or r.state == ST_PENDING or r.state == ST_DELAYED) then
      -- it started and has not ended: this job becomes its follow-up and takes the key
      park = other
      redis.call('HDEL', K_KEYS, key)
    end
  end
  if mode == 'deb' then
    delay = window
    if max_wait > 0 and max_wait < delay then delay = max_wait end
  elseif park then
    delay = 1 -- scheduled, then parked below
  end
  local status, ref = enqueue_one(now, id, payload, delay, tonumber(ARGV[b + 3]),
    tonumber(ARGV[b + 4]), codec, ARGV[b + 6], key, ARGV[b + 8])
  if status ~= S_CREATED and status ~= S_REPLACED then
    -- not added (its id is taken): the running job keeps the key
    if park then redis.call('HSET', K_KEYS, key, park) end
    return status, ref
  end
  -- the new job: flag it and store its job control data
  local c = {}
  local expires_at, expires_in = tonumber(ARGV[b + 10]), tonumber(ARGV[b + 9])
  if expires_at > 0 then c.e = expires_at elseif expires_in > 0 then c.e = now + expires_in end
  if c.e then c.t = tonumber(ARGV[b + 14]) end
  if mode ~= '' then c.m = mode end
  if mode == 'thr' then redis.call('SET', K_PREFIX .. 'thr:' .. key, id, 'PX', window) end
  if park then
    c.a = park
    redis.call('ZADD', K_DELAYED, PARKED, id)
    local pc = control().get(park) or {m = 'keep'}
    pc.n = id
    redis.call('HSET', K_PREFIX .. 'ctl', park, cjson.encode(pc))
    local pr = rec_decode(redis.call('HGET', K_JOBS, park))
    if pr and bit.band(pr.flags, FLAG_CONTROL) == 0 then
      pr.flags = bit.bor(pr.flags, FLAG_CONTROL)
      redis.call('HSET', K_JOBS, park, rec_encode(pr))
    end
  end
  if next(c) then
    redis.call('HSET', K_PREFIX .. 'ctl', id, cjson.encode(c))
    local r = rec_decode(redis.call('HGET', K_JOBS, id))
    r.flags = bit.bor(r.flags, FLAG_CONTROL)
    redis.call('HSET', K_JOBS, id, rec_encode(r))
  end
  return status, ref
end

local n = tonumber(ARGV[1])
local problem = problem_of(n)
if problem then return wrongtype(problem) end
local now = now_ms()
local out = {}
for i = 0, n - 1 do
  local status, ref = enqueue_control(now, 2 + FIELDS * i)
  out[#out + 1] = status
  out[#out + 1] = ref
end
offer_touched()
flush_counters()
wake_if_needed()
return out
