--[[ extend: lengthen leases for long work. Fenced like release: a lease that expired is
still extended while no one else was handed the job.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  lease_ms: the new lease, counted from now
ARGV[2]  n: number of jobs
ARGV[3+2i .. 4+2i], for job i: id, lease token
Returns  {lease_deadline, status_1, ..., status_n}: OK, LEASE_LOST, NOT_FOUND, CORRUPT;
         CANCELLED: extended, but a cancel was asked (cancel.lua): stop the job.
Errors   DURQ_WRONGTYPE when a durq key holds another Redis type, before any change
Memory   runs while the server is at maxmemory, as an acknowledgement must
         (lib/core/frees_memory.lua)
Cost     O(n) commands.
]]
--- @include "lib/core/status"
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/frees_memory"
--- @include "lib/core/lease"
--- @include "lib/core/types"

local lease = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local problem = keys_error({'jobs', 'done', 'active'})
if problem then return wrongtype(problem) end
local now = now_ms()
local deadline = now + lease
local out = {deadline}
local zargs = {}
for i = 0, n - 1 do
  local b = 3 + 2 * i
  local r, status = held(ARGV[b], ARGV[b + 1])
  if r then
    zargs[#zargs + 1] = deadline
    zargs[#zargs + 1] = ARGV[b]
    -- the durable cancel flag (cancel.lua): its worker learns of it within a third of
    -- the lease even when the cancel channel's message was lost
    if bit.band(r.flags, FLAG_CANCEL) ~= 0 then status = S_CANCELLED end
  end
  out[#out + 1] = status
end
if #zargs > 0 then redis.call('ZADD', K_ACTIVE, unpack(zargs)) end
return out
