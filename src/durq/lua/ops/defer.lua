--[[ defer: put jobs back for a while without counting a failed attempt (the attempt
the delivery used is given back). Used for "not now" and by workers shutting down.
Fenced like release.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  n: number of jobs
ARGV[2+3i .. 4+3i], for job i: id, lease token, delay_ms (0: ready again now)
Returns  {status_1, ..., status_n}: OK, LEASE_LOST, NOT_FOUND, CORRUPT; CANCELLED when a
         cancel was asked while the job ran: it ends cancelled instead of coming back.
Effects  under a max_active (flow control) one idle consumer is woken for the freed place.
Errors   DURQ_WRONGTYPE when a durq key holds another Redis type (that of a group a job
         goes back to included), before any change
Memory   runs while the server is at maxmemory, as an acknowledgement must
         (lib/core/frees_memory.lua)
Cost     O(n) commands.
]]
--- @include "lib/core/status"
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/frees_memory"
--- @include "lib/core/lease"
--- @include "lib/core/send_back"
--- @include "lib/core/types"

local n = tonumber(ARGV[1])
local problem = keys_error({'jobs', 'done', 'active', 'delayed', 'conf', 'gactive', 'glimit',
  'rr', 'rrset', 'reasons', 'keys', 'ctl', 'progress'})
for i = 0, n - 1 do
  local b = 2 + 3 * i
  local r = not problem and tonumber(ARGV[b + 2]) == 0 and held(ARGV[b], ARGV[b + 1])
  if r then problem = group_error(r.group) end
end
if problem then return wrongtype(problem) end
local now = now_ms()
local out = {}
for i = 0, n - 1 do
  local b = 2 + 3 * i
  local id = ARGV[b]
  local r, status = held(id, ARGV[b + 1])
  if r and ends_cancelled(id, r, now) then -- its cancel was asked: it does not come back
    status = S_CANCELLED
  elseif r then
    give_back(id, r, tonumber(ARGV[b + 2]), now)
    count('deferred', 1)
  end
  out[#out + 1] = status
end
sent_back(n)
return out
