--[[ step_sleep: a running job reached a durable sleep (docs/durable.md). The first time
the sleep is reached its end is stored, from server time, so a replay never moves it;
until then the job is parked (lib/durable/park.lua): it leaves its worker, gives back
the attempt its delivery used, its group slot and its place under max_active, and is
promoted at the end like any delayed job. Fenced like release.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  id, ARGV[2] lease token, ARGV[3] step name
ARGV[4]  'in' (ARGV[5]: ms from now) or 'at' (ARGV[5]: epoch ms)
Returns  {'parked', until}: parked until then (or until its expiry, sooner);
         {'done', until}: the end has passed (or is now): the job goes on;
         {'cancelled'}: a cancel was asked while it ran: it ended cancelled now;
         {'conflict', record}: the name holds another kind of record (nothing changed);
         or a status: LEASE_LOST, NOT_FOUND, CORRUPT (nothing changed)
Effects  the job is flagged FLAG_CONTROL (lib/durable/steps.lua); a wait it was
         registered for is forgotten; it is listed in <prefix>dsleep until it ends
Errors   DURQ_WRONGTYPE when a durq key holds another Redis type, before any change
Cost     O(1) commands.
]]
--- @include "lib/core/status"
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/lease"
--- @include "lib/core/types"
--- @include "lib/durable/steps"
--- @include "lib/durable/record"
--- @include "lib/durable/park"

local id, step = ARGV[1], ARGV[3]
local sk = steps_key(id)
local problem = keys_error({'jobs', 'done', 'active', 'delayed', 'conf', 'gactive', 'glimit',
  'rr', 'rrset', 'reasons', 'keys', 'ctl', 'progress'}) or type_error(sk, 'hash')
  or type_error(K_PREFIX .. 'dsleep', 'zset') or type_error(K_PREFIX .. 'dwait', 'zset')
if problem then return wrongtype(problem) end
local r, status = held(id, ARGV[2])
if not r then return status end
local now = now_ms()
local raw = redis.call('HGET', sk, step)
local untl
if raw then
  local f = step_kind(raw) == 'sleep' and step_fields(raw)
  if not f then return {'conflict', raw} end
  untl = tonumber(f.u)
else
  untl = tonumber(ARGV[5])
  if ARGV[4] == 'in' then untl = now + untl end
end
if untl <= now then
  if not raw then redis.call('HSET', sk, step, sleep_record(untl, now)) end
  if bit.band(r.flags, FLAG_CONTROL) == 0 then
    r.flags = bit.bor(r.flags, FLAG_CONTROL)
    redis.call('HSET', K_JOBS, id, rec_encode(r))
  end
  return {'done', untl}
end
local out = durable_leave(id, r, now, function()
  if not raw then redis.call('HSET', sk, step, sleep_record(untl, now)) end
  wait_unregister(id)
  redis.call('ZADD', K_PREFIX .. 'dsleep', untl, id)
  return durable_park_due(id, r, untl)
end)
offer_touched()
flush_counters()
wake_if_needed()
return out
