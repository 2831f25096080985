--[[ rate_limited: jobs whose task said "slow down" (durq.RateLimited). Each goes back to
the head of its group at once without counting an attempt (the attempt its delivery used
is given back, so such waits never dead-letter a job), and its scope pauses: its group,
or the whole queue. Fenced like release.
KEYS     the queue key vector (lib/keys.lua)
ARGV[1]  n: number of jobs
ARGV[2+4i .. 5+4i], for job i: id, lease token, scope ('group' or 'queue'), pause_ms
Returns  {status_1, ..., status_n}: OK, LEASE_LOST, NOT_FOUND, CORRUPT.
Effects  the scope's limiter TAT (lib/rate_limit.lua) moves to now + pause_ms (plus its
         burst tolerance) unless it is later already; one idle consumer is woken to plan
         the wait, and the scope stays parked until then (lib/flow.lua).
Errors   DURQ_ARG for an unknown scope; DURQ_WRONGTYPE when a durq key holds another
         Redis type (that of a group a job goes back to included); both before any change
Memory   runs while the server is at maxmemory, as an acknowledgement must
         (lib/frees_memory.lua)
Cost     O(n) commands.
]]
--- @include "lib/status"
--- @include "lib/keys"
--- @include "lib/clock"
--- @include "lib/frees_memory"
--- @include "lib/lease"
--- @include "lib/send_back"
--- @include "lib/types"
--- @include "lib/active_cap"
--- @include "lib/flow_conf"

local n = tonumber(ARGV[1])
for i = 0, n - 1 do
  local scope = ARGV[4 + 4 * i]
  if scope ~= 'group' and scope ~= 'queue' then
    return redis.error_reply('DURQ_ARG unknown scope ' .. tostring(scope) ..
      ': use group or queue')
  end
end
local problem = keys_error({'jobs', 'done', 'active', 'delayed', 'conf', 'gactive', 'glimit',
  'rr', 'rrset'}) or flow_error(true)
for i = 0, n - 1 do
  local b = 2 + 4 * i
  local r = not problem and held(ARGV[b], ARGV[b + 1])
  if r then problem = group_error(r.group) end
end
if problem then return wrongtype(problem) end
local now = now_ms()
local f = get_flow()

local function pause(scope, g, ms)
  if scope == 'queue' then
    f.tat = gcra_pause(f.tat, f.qrate, now, ms)
    redis.call('HSET', K_PREFIX .. 'flow', 'tat', tat_text(f.tat))
  else
    local gk = K_PREFIX .. 'gtat'
    local tat = tonumber(redis.call('HGET', gk, g))
    redis.call('HSET', gk, g, tat_text(gcra_pause(tat, group_rate_of(g), now, ms)))
    if not f.parks then
      f.parks = true
      redis.call('HSET', K_PREFIX .. 'flow', 'parks', 1)
    end
  end
  -- a consumer dequeues, parks the scope and plans the wake-up (the alarm)
  need_wake = true
end

local out = {}
for i = 0, n - 1 do
  local b = 2 + 4 * i
  local id = ARGV[b]
  local r, status = held(id, ARGV[b + 1])
  if r then
    if r.attempts > 0 then r.attempts = r.attempts - 1 end
    send_back(id, r, 0, now)
    count('rate_limited', 1)
    local ms = tonumber(ARGV[b + 3])
    if ms > 0 then pause(ARGV[b + 2], r.group, ms) end
  end
  out[#out + 1] = status
end
if n > 0 then cap_freed() end
offer_touched()
flush_counters()
wake_if_needed()
return out
