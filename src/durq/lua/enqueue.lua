--[[ enqueue: add jobs, idempotently by id, optionally deduplicated or superseded by key.
KEYS     the queue key vector (lib/keys.lua)
ARGV[1]  n: number of jobs
ARGV[2+9i .. 10+9i], for job i in 0..n-1:
         id, payload, delay_ms, priority (-10..10), max_attempts, codec,
         group ('' = default group), key ('' = none), replace ('1' or '0')
Returns  {status_1, ref_1, ..., status_n, ref_n} where status is
           CREATED      ref = id
           EXISTS       ref = id: a job with this id exists, or finished less than the
                        dedup window after it was enqueued; nothing changed
           DEDUPLICATED ref = id of the not-yet-started job that holds the key
           REPLACED     ref = id of the not-yet-started job this one superseded
Errors   WRONGTYPE when a durq key holds another Redis type; the jobs before the failing
         one are enqueued, the rest are not (each job is all-or-nothing)
Cost     O(n) commands; superseding a default-priority pending job leaves its id in
         place, skipped (and its record deleted) when dequeue reaches it.
]]
--- @include "lib/status"
--- @include "lib/keys"
--- @include "lib/clock"
--- @include "lib/conf"
--- @include "lib/record"
--- @include "lib/counters"
--- @include "lib/group_push"
--- @include "lib/offer"
--- @include "lib/schedule"
--- @include "lib/reason"

local FIELDS = 9

local function supersede(other, r, by, now)
  if r.state == ST_DELAYED then
    redis.call('ZREM', K_DELAYED, other)
    redis.call('ZADD', K_DONE, now + get_conf().dedup_window, other)
  elseif r.prio ~= 0 then
    redis.call('ZREM', ready_prio(r.group), other)
    ready_add(r.group, -1)
    redis.call('ZADD', K_DONE, now + get_conf().dedup_window, other)
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
      if r and (r.state == ST_PENDING or r.state == ST_DELAYED) then
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

local n = tonumber(ARGV[1])
local now = now_ms()
local out = {}
for i = 0, n - 1 do
  local b = 2 + FIELDS * i
  local status, ref = enqueue_one(now, ARGV[b], ARGV[b + 1], tonumber(ARGV[b + 2]),
    tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5]), ARGV[b + 6],
    ARGV[b + 7], ARGV[b + 8])
  out[#out + 1] = status
  out[#out + 1] = ref
end
offer_touched()
flush_counters()
wake_if_needed()
return out
