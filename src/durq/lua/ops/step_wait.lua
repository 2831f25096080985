--[[ step_wait: a running job reached a durable wait for a signal (docs/durable.md).
Its outcome is recorded once and never changes: the signal, when one is kept
(<prefix>sig:<name>, sent before the wait was reached, within its ttl) or arrives while
it waits (lib/durable/signal.lua); else a timeout, once the deadline has passed. Until
then the job is parked as a sleep parks it (lib/durable/park.lua), registered as a
waiter of the signal: the signal makes it ready at once, its deadline promotes it like
any delayed job (a wait without a timeout is never promoted). Fenced like release.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  id, ARGV[2] lease token, ARGV[3] step name, ARGV[4] signal name
ARGV[5]  timeout: ms from the first time the wait is reached, '' for none (0: a
         signal kept now, else a timeout at once)
Returns  {'record', record}: the wait's outcome (a signal or a timeout record,
         lib/durable/record.lua): the job goes on;
         {'parked', due}: parked until its deadline (or its expiry, sooner);
         {'cancelled'}: a cancel was asked while it ran: it ended cancelled now;
         {'conflict', record}: the name holds another kind of record (nothing changed);
         or a status: LEASE_LOST, NOT_FOUND, CORRUPT (nothing changed)
Effects  the job is flagged FLAG_CONTROL (lib/durable/steps.lua); while parked it is a
         waiter of the signal (<prefix>sw:<signal>, the '~w' field of its steps) and is
         listed in <prefix>dwait; a sleep it was listed for (<prefix>dsleep) is forgotten
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

local id, step, signal = ARGV[1], ARGV[3], ARGV[4]
local sk = steps_key(id)
local gk = K_PREFIX .. 'sig:' .. signal
local problem = keys_error({'jobs', 'done', 'active', 'delayed', 'conf', 'gactive', 'glimit',
  'rr', 'rrset', 'reasons', 'keys', 'ctl', 'progress'}) or type_error(sk, 'hash')
  or type_error(gk, 'hash') or type_error(K_PREFIX .. 'sw:' .. signal, 'hash')
  or type_error(K_PREFIX .. 'dsleep', 'zset') or type_error(K_PREFIX .. 'dwait', 'zset')
if problem then return wrongtype(problem) end
local r, status = held(id, ARGV[2])
if not r then return status end
local now = now_ms()

local function flagged()
  if bit.band(r.flags, FLAG_CONTROL) == 0 then
    r.flags = bit.bor(r.flags, FLAG_CONTROL)
    redis.call('HSET', K_JOBS, id, rec_encode(r))
  end
end

-- the outcome `rec`, recorded now: the wait is over
local function outcome(rec)
  redis.call('HSET', sk, step, rec)
  wait_unregister(id)
  flagged()
  return {'record', rec}
end

local raw = redis.call('HGET', sk, step)
local kind = step_kind(raw)
local deadline, due
local since = now
if kind == 'signal' or kind == 'timeout' then
  return {'record', raw} -- decided while the job was on its way here
elseif kind == 'wait' then
  local f = step_fields(raw)
  if not f or f.s ~= signal then return {'conflict', raw} end
  deadline = tonumber(f.u) or 0
  if deadline > 0 and deadline <= now then return outcome(timeout_record(signal, deadline, now)) end
  due = deadline > 0 and deadline or DURABLE_FOREVER
  since = tonumber(f.at) or now
elseif raw then
  return {'conflict', raw}
else
  local kept = redis.call('HMGET', gk, 'i', 'p')
  if kept[1] and kept[2] then return outcome(signal_record(signal, kept[1], kept[2], now)) end
  if ARGV[5] == '' then
    deadline, due = 0, DURABLE_FOREVER
  else
    deadline = now + tonumber(ARGV[5])
    if deadline <= now then return outcome(timeout_record(signal, deadline, now)) end
    due = deadline
  end
end
local out = durable_leave(id, r, now, function()
  due = durable_park_due(id, r, due)
  local old = redis.call('HGET', sk, '~w') -- a registration its last run left
  if old and old ~= signal then redis.pcall('HDEL', K_PREFIX .. 'sw:' .. old, id) end
  -- the record says where it is parked: a signal wakes it only while it is parked there
  redis.call('HSET', sk, step, wait_record(signal, deadline, due, since), '~w', signal)
  redis.call('HSET', K_PREFIX .. 'sw:' .. signal, id, step)
  redis.call('ZADD', K_PREFIX .. 'dwait', due, id)
  redis.call('ZREM', K_PREFIX .. 'dsleep', id)
  return due
end)
offer_touched()
flush_counters()
wake_if_needed()
return out
