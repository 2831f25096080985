--[[ rate_limited: jobs whose task said "slow down" (durq.RateLimited). Each goes back to
the head of its group at once without counting an attempt (the attempt its delivery used
is given back, so such waits never dead-letter a job), and its scope pauses: its group,
or the whole queue. Fenced like release.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  m: the number of other shards of the queue (0: a plain queue, or no job of this
         call pauses the queue)
ARGV[2 .. m+1]  their prefixes
ARGV[m+2]  n: number of jobs
ARGV[m+3+4i .. m+6+4i], for job i: id, lease token, scope ('group' or 'queue'), pause_ms
Returns  {status_1, ..., status_n}: OK, LEASE_LOST, NOT_FOUND, CORRUPT; CANCELLED when a
         cancel was asked while the job ran: it ends cancelled instead of coming back
         (its scope still pauses: the upstream's answer holds).
Effects  the scope's limiter TAT (lib/limits/rate_limit.lua) moves to now + pause_ms (plus its
         burst tolerance) unless it is later already; one idle consumer is woken to plan
         the wait, and the scope stays parked until then (lib/limits/gate.lua). A pause of the
         queue also goes to the other shards (m > 0): one entry per shard in this shard's
         outbox ('P', applied by limits_pause.lua), unless they know of a pause that ends
         at most a tenth of this one's length earlier (lib/limits/queue_pause.lua).
Errors   DURQ_ARG for an unknown scope; DURQ_WRONGTYPE when a durq key holds another
         Redis type (that of a group a job goes back to included, and the outbox's when
         m > 0); both before any change
Memory   runs while the server is at maxmemory, as an acknowledgement must
         (lib/core/frees_memory.lua)
Cost     O(n) commands, plus O(m) for a pause sent to the other shards.
]]
--- @include "lib/core/status"
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/frees_memory"
--- @include "lib/core/lease"
--- @include "lib/core/send_back"
--- @include "lib/core/types"
--- @include "lib/limits/conf"
--- @include "lib/limits/queue_pause"

local m = tonumber(ARGV[1])
local others = {unpack(ARGV, 2, m + 1)} -- the other shards' prefixes
local n = tonumber(ARGV[m + 2])
local J = m + 3 -- ARGV index of the first job's fields
for i = 0, n - 1 do
  local scope = ARGV[J + 2 + 4 * i]
  if scope ~= 'group' and scope ~= 'queue' then
    return redis.error_reply('DURQ_ARG unknown scope ' .. tostring(scope) ..
      ': use group or queue')
  end
end
local problem = keys_error({'jobs', 'done', 'active', 'delayed', 'conf', 'gactive', 'glimit',
  'rr', 'rrset', 'reasons', 'keys', 'ctl', 'progress'}) or flow_error(true)
if not problem and m > 0 then problem = queue_pause_outbox_error() end
for i = 0, n - 1 do
  local b = J + 4 * i
  local r = not problem and held(ARGV[b], ARGV[b + 1])
  if r then problem = group_error(r.group) end
end
if problem then return wrongtype(problem) end
local now = now_ms()
local f = get_flow()

local function pause(scope, g, ms)
  if scope == 'queue' then
    queue_pause(f, now, now + ms)
    queue_pause_send(now, now + ms, ms, others) -- the other shards, if any
    return
  end
  local gk = K_PREFIX .. 'gtat'
  local tat = tonumber(redis.call('HGET', gk, g))
  redis.call('HSET', gk, g, tat_text(gcra_pause(tat, group_rate_of(g), now, ms)))
  if not f.parks then
    f.parks = true
    redis.call('HSET', K_PREFIX .. 'flow', 'parks', 1)
  end
  -- a consumer dequeues, parks the scope and plans the wake-up (the alarm)
  need_wake = true
end

local out = {}
for i = 0, n - 1 do
  local b = J + 4 * i
  local id = ARGV[b]
  local r, status = held(id, ARGV[b + 1])
  if r then
    -- the upstream's answer holds whatever became of the job: its scope pauses
    local ms = tonumber(ARGV[b + 3])
    if ms > 0 then pause(ARGV[b + 2], r.group, ms) end
    if ends_cancelled(id, r, now) then -- its cancel was asked: it does not come back
      status = S_CANCELLED
    else
      give_back(id, r, 0, now)
      count('rate_limited', 1)
    end
  end
  out[#out + 1] = status
end
sent_back(n)
return out
