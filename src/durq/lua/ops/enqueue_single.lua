--[[ enqueue_single: add one job that has no delay, priority, group or dedup key.
The path of every single plain enqueue (Task.enqueue, Queue.enqueue): the same effects
and results as enqueue_plain with one ungrouped job, straight-line, with no table but
its reply (enqueue_plain's batch bookkeeping was a third of its server time).
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  id
ARGV[2]  payload (encoded)
ARGV[3]  max_attempts
ARGV[4]  codec id
Returns  {status, id}: CREATED, or EXISTS (the id exists or finished less than the
         dedup window after its enqueue)
Errors   DURQ_WRONGTYPE naming the key when a durq key holds another Redis type; every
         read comes before the first write, which is itself the type check of its key
         (pcall), so the call then changes nothing
Cost     O(1): 8 commands for a queue that has work, 12 when it must wake the queue's
         idle consumers.
]]
--- @include "lib/core/status"
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/record_layout"
--- @include "lib/core/typed_read"

local id = ARGV[1]
local err, found = read(K_JOBS, 'hash', 'HEXISTS', K_JOBS, id)
if err then return err end
local tomb
err, tomb = read(K_DONE, 'zset', 'ZSCORE', K_DONE, id)
if err then return err end
local now = now_ms()
tomb = tomb and tonumber(tomb)
if found == 1 or (tomb and tomb > now) then return { S_EXISTS, id } end

-- the default group is offered to the rotation unless it is listed there already
local listed
err, listed = read(K_RRSET, 'set', 'SISMEMBER', K_RRSET, '')
if err then return err end
if listed == 0 then
  err = read(K_RR, 'list', 'LLEN', K_RR)
  if err then return err end
end

-- write: the id into its list first, with pcall: it is also the type check of the list
-- (a wrong type fails it, and nothing has changed yet)
local list = K_PREFIX .. 'pending'
err = read(list, 'list', 'RPUSH', list, id)
if err then return err end
if tomb then redis.call('ZREM', K_DONE, id) end
redis.call('HSET', K_JOBS, id,
  rec_new(ST_PENDING, 0, tonumber(ARGV[4]), tonumber(ARGV[3]), now, '', '', ARGV[2]))
if listed == 0 then
  redis.call('RPUSH', K_RR, '')
  redis.call('SADD', K_RRSET, '')
end

-- bookkeeping after the job changes, with pcall (as lib/core/counters.lua does): a corrupted
-- stats key cannot undo or block the enqueue
redis.pcall('HINCRBY', K_STATS, 'ready', 1)
redis.pcall('HINCRBY', K_STATS, 'enqueued', 1)
if listed == 0 then redis.pcall('ZADD', K_WAKE, 0, '0') end
return { S_CREATED, id }
