--[[ enqueue: add jobs, idempotently by id, optionally deduplicated or superseded by key.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  n: number of jobs
ARGV[2+9i .. 10+9i], for job i in 0..n-1:
         id, payload, delay_ms, priority (-10..10), max_attempts, codec,
         group ('' = default group), key ('' = none), replace ('1' or '0');
         delay_ms is ms from now, or '@' and the epoch ms the job is due at (an eta),
         measured against the server's clock (lib/core/clock.lua: delay_of)
Returns  {status_1, ref_1, ..., status_n, ref_n} where status is
           CREATED      ref = id
           EXISTS       ref = id: a job with this id exists, or finished less than the
                        dedup window after it was enqueued; nothing changed
           DEDUPLICATED ref = id of the not-yet-started job that holds the key
           REPLACED     ref = id of the not-yet-started job this one superseded
Errors   DURQ_WRONGTYPE when a key the call would use holds another Redis type: the
         call changes nothing (lib/core/types.lua)
Cost     O(n) commands; superseding a default-priority pending job leaves its id in
         place, skipped (and its record deleted) when dequeue reaches it.
]]
--- @include "lib/core/status"
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/conf"
--- @include "lib/core/record"
--- @include "lib/core/counters"
--- @include "lib/groups/push"
--- @include "lib/groups/offer"
--- @include "lib/core/delayed"
--- @include "lib/core/reason"
--- @include "lib/core/enqueue_one"

local n = tonumber(ARGV[1])
local problem = enqueue_problem(2, n)
if problem then return wrongtype(problem) end
local now = now_ms()
local out = {}
for i = 0, n - 1 do
  local b = 2 + ENQUEUE_FIELDS * i
  local status, ref = enqueue_one(now, ARGV[b], ARGV[b + 1], delay_of(ARGV[b + 2], now),
    tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5]), ARGV[b + 6],
    ARGV[b + 7], ARGV[b + 8])
  out[#out + 1] = status
  out[#out + 1] = ref
end
offer_touched()
flush_counters()
wake_if_needed()
return out
