--[[ requeue: jobs failed. Each failure counts; the job comes back after its delay, to
the head of its group, or is dead-lettered when its attempts are exhausted or when the
caller asks for it. Fenced like release.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  result_ttl_ms: how long results given below are kept
ARGV[2]  n: number of jobs
ARGV[3+7i .. 9+7i], for job i: id, lease token, delay_ms, reason (JSON), dead ('1'/'0'),
         result ('' = none): stored like release's results if the job is dead-lettered,
         so a caller waiting for the result learns of the failure; error: a JSON object,
         the failure as the job's error ring keeps it (short: the head of the message,
         the tail of the traceback)
Returns  {status_1, ..., status_n}: RETRYING, DEAD, LEASE_LOST, NOT_FOUND, CORRUPT;
         CANCELLED when a cancel was asked while the job ran: it ends cancelled.
Effects  under a max_active (flow control) one idle consumer is woken for the freed place.
         Each failure is also kept in the job's error ring, <prefix>errors:<id>
         (lib/core/attempt_errors.lua): its last 5 failures, each its error with its
         failure count, attempt and the server's time, kept for result_ttl_ms after the
         latest.
Errors   DURQ_WRONGTYPE when a durq key holds another Redis type (that of a group a job
         goes back to included, and each job's error ring), before any change
Memory   runs while the server is at maxmemory, as an acknowledgement must
         (lib/core/frees_memory.lua)
Cost     O(n) commands (3 more per job for its error ring: TYPE, HSET, PEXPIRE).
]]
--- @include "lib/core/status"
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/frees_memory"
--- @include "lib/core/lease"
--- @include "lib/core/dead_letter"
--- @include "lib/core/send_back"
--- @include "lib/core/result"
--- @include "lib/control/job_control"
--- @include "lib/core/types"
--- @include "lib/core/attempt_errors"

local result_ttl = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local problem = keys_error({'jobs', 'done', 'reasons', 'dead', 'active', 'delayed', 'conf',
  'gactive', 'glimit', 'rr', 'rrset', 'keys', 'ctl', 'progress'})
for i = 0, n - 1 do
  local b = 3 + 7 * i
  problem = problem or attempt_errors_type_error(ARGV[b])
  local r = not problem and tonumber(ARGV[b + 2]) == 0 and held(ARGV[b], ARGV[b + 1])
  if r then problem = group_error(r.group) end
end
if problem then return wrongtype(problem) end
local now = now_ms()
local out = {}
for i = 0, n - 1 do
  local b = 3 + 7 * i
  local id = ARGV[b]
  local r, status = held(id, ARGV[b + 1])
  if r and ends_cancelled(id, r, now) then -- its cancel was asked: never retried
    status = S_CANCELLED
  elseif r then
    r.failures = r.failures + 1
    r.req = now
    redis.call('HSET', K_REASONS, id, ARGV[b + 3])
    record_attempt_error(id, r.failures, r.attempts, now, ARGV[b + 6], result_ttl)
    count('failed', 1)
    if ARGV[b + 4] == '1' or r.attempts >= r.max then
      kill(id, r, now)
      if ARGV[b + 5] ~= '' then store_result(id, ARGV[b + 5], result_ttl) end
      status = S_DEAD
    else
      send_back(id, r, tonumber(ARGV[b + 2]), now)
      count('retried', 1)
      status = S_RETRYING
    end
  end
  out[#out + 1] = status
end
sent_back(n)
return out
