--[[ progress: a running job says how far it got. Fenced like release: only the holder of
the current lease may write, so a worker whose lease was taken over cannot overwrite the
progress of the job's new run.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  id, ARGV[2] lease token
ARGV[3]  the progress: a JSON object with at least one field ({"fraction": 0.5, ...});
         stored at <prefix>progress[id] with the server time first: {"at": ms, ...}
Returns  status: OK, CANCELLED (written, but a cancel was asked: stop the job),
         LEASE_LOST, NOT_FOUND, CORRUPT
Effects  the job is flagged FLAG_CONTROL, so that the paths ending it remove its progress
         with its record (lib/control/job_control.lua)
Errors   DURQ_WRONGTYPE when a durq key holds another Redis type, before any change
Cost     O(1).
]]
--- @include "lib/core/status"
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/lease"
--- @include "lib/core/types"

local problem = keys_error({'jobs', 'done', 'progress'})
if problem then return wrongtype(problem) end
local id = ARGV[1]
local r, status = held(id, ARGV[2])
if not r then return status end
local report = '{"at":' .. now_ms() .. ',' .. string.sub(ARGV[3], 2)
redis.call('HSET', K_PREFIX .. 'progress', id, report)
if bit.band(r.flags, FLAG_CONTROL) == 0 then
  r.flags = bit.bor(r.flags, FLAG_CONTROL)
  redis.call('HSET', K_JOBS, id, rec_encode(r))
end
if bit.band(r.flags, FLAG_CANCEL) ~= 0 then return S_CANCELLED end
return S_OK
