--[[ step_record: a durable step of a running job completed: its result is stored with
the job, once (docs/durable.md). Fenced like release: only the holder of the current
lease may record, so a worker whose lease was taken over cannot.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  id, ARGV[2] lease token, ARGV[3] step name
ARGV[4]  the record without its kind and time: a JSON object ({"ms":..,"n":..,"v":..},
         lib/durable/record.lua), stored as {"k":"step","at":<server ms>,...}
ARGV[5]  the most records a job may store
Returns  {'ok'}: stored; {'kept', record}: a record is stored under the name already
         (kept: the first write wins); or a status: LEASE_LOST, NOT_FOUND, CORRUPT
         (nothing stored)
Effects  the job is flagged FLAG_CONTROL, so the paths ending it forget its steps with
         its record (lib/durable/steps.lua)
Errors   DURQ_ARG when the job stores ARGV[5] records already; DURQ_WRONGTYPE when a
         durq key holds another Redis type; both before any change
Cost     O(1).
]]
--- @include "lib/core/status"
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/lease"
--- @include "lib/core/types"
--- @include "lib/durable/steps"

local id = ARGV[1]
local sk = steps_key(id)
local problem = keys_error({'jobs', 'done'}) or type_error(sk, 'hash')
if problem then return wrongtype(problem) end
local r, status = held(id, ARGV[2])
if not r then return status end
local kept = redis.call('HGET', sk, ARGV[3])
if kept then return {'kept', kept} end
if redis.call('HLEN', sk) >= tonumber(ARGV[5]) then
  return redis.error_reply('DURQ_ARG job ' .. id .. ' stores ' .. ARGV[5]
    .. ' steps already, the most a job may')
end
redis.call('HSET', sk, ARGV[3],
  '{"k":"step","at":' .. string.format('%d', now_ms()) .. ',' .. string.sub(ARGV[4], 2))
if bit.band(r.flags, FLAG_CONTROL) == 0 then
  r.flags = bit.bor(r.flags, FLAG_CONTROL)
  redis.call('HSET', K_JOBS, id, rec_encode(r))
end
return {'ok'}
