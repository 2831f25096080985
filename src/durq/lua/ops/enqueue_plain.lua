--[[ enqueue_plain: add jobs that have no delay, no priority and no dedup key, batched.
The common case of enqueue with the same results, in a few commands per batch instead of
a few per job (one HMGET and one ZMSCORE for the existence checks, HEXISTS and ZSCORE for
one job, one RPUSH per group, one HSET for all records). The client picks it when every
job of the batch is plain. It is also the path of every single enqueue, so it is written
for a short run: it includes only the small helpers it uses and keeps its own code
straight-line (Lua re-creates each function and table of a script on every call under
EVALSHA: docs/decisions/enqueue-variants.md).
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  n: number of jobs
ARGV[2+9i .. 10+9i], for job i: the nine enqueue fields (see enqueue.lua); delay,
         priority, key and replace are 0/''.
Returns  {status_1, id_1, ...}: CREATED, or EXISTS (the id exists or finished less than
         the dedup window after its enqueue, or appears earlier in the batch)
Errors   DURQ_WRONGTYPE naming the key when a durq key holds another Redis type; every
         read comes before the first write, which is itself the type check of its key
         (pcall), so the call then changes nothing
Cost     O(n) work in O(1 + groups) commands: 8 for one ungrouped job of a queue that
         has work, 12 when it must wake the queue's idle consumers.
]]
--- @include "lib/core/status"
--- @include "lib/core/keys"
--- @include "lib/core/conf_defaults"
--- @include "lib/core/clock"
--- @include "lib/core/record_layout"
--- @include "lib/groups/keys"
--- @include "lib/core/typed_read"

local FIELDS = 9
local B0 = 2 -- ARGV index of the first job's first field

local n = tonumber(ARGV[1])
local ids = {}
for i = 0, n - 1 do ids[i + 1] = ARGV[B0 + FIELDS * i] end
local err, recs, tombs
if n == 1 then -- a single enqueue: the one-id forms, which copy no record
  local found, tomb
  err, found = read(K_JOBS, 'hash', 'HEXISTS', K_JOBS, ids[1])
  if err then return err end
  err, tomb = read(K_DONE, 'zset', 'ZSCORE', K_DONE, ids[1])
  if err then return err end
  recs, tombs = { found == 1 }, { tomb }
else
  err, recs = read(K_JOBS, 'hash', 'HMGET', K_JOBS, unpack(ids))
  if err then return err end
  err, tombs = read(K_DONE, 'zset', 'ZMSCORE', K_DONE, unpack(ids))
  if err then return err end
end
local now = now_ms()

-- decide everything, still reading only
local out, seen, stale = {}, {}, {}
local by_group, groups, fields, heads = {}, {}, {}, {}
for i = 1, n do
  local id = ids[i]
  local t = tombs[i] and tonumber(tombs[i])
  if recs[i] or seen[id] or (t and t > now) then
    out[#out + 1] = S_EXISTS
  else
    seen[id] = true
    if t then stale[#stale + 1] = id end
    local b = B0 + FIELDS * (i - 1)
    local g = ARGV[b + 6]
    local list = by_group[g]
    if list == nil then
      list = {}
      by_group[g] = list
      groups[#groups + 1] = g
    end
    list[#list + 1] = id
    -- the header is the same for every job of a group with the same codec and limit
    local hk = ARGV[b + 5] .. ':' .. ARGV[b + 4] .. ':' .. g
    local head = heads[hk]
    if head == nil then
      head = rec_new(ST_PENDING, 0, tonumber(ARGV[b + 5]), tonumber(ARGV[b + 4]), now, g, '', '')
      heads[hk] = head
    end
    fields[#fields + 1] = id
    fields[#fields + 1] = head .. ARGV[b + 1]
    out[#out + 1] = S_CREATED
  end
  out[#out + 1] = id
end
local created = #fields / 2
if created == 0 then return out end

-- A group about to get ready jobs is offered to the rotation unless it is listed there
-- already, or it is a named group whose slots are all taken.
local offers = {}
local group_limit = nil -- the queue's default, read once if needed
for i = 1, #groups do
  local g = groups[i]
  if i > 1 then -- the first group's list is checked by its RPUSH, the first write
    local list = ready_list(g)
    err = read(list, 'list', 'LLEN', list)
    if err then return err end
  end
  local member
  err, member = read(K_RRSET, 'set', 'SISMEMBER', K_RRSET, g)
  if err then return err end
  if member == 0 then
    local offer = g == ''
    if not offer then
      local lim = tonumber(redis.call('HGET', K_GLIMIT, g))
      if lim == nil then
        group_limit = group_limit or tonumber(redis.call('HGET', K_CONF, 'group_limit'))
          or DEFAULT_GROUP_LIMIT
        lim = group_limit
      end
      offer = lim <= 0 or (tonumber(redis.call('HGET', K_GACTIVE, g)) or 0) < lim
    end
    if offer then offers[#offers + 1] = g end
  end
end
if #offers > 0 then
  err = read(K_RR, 'list', 'LLEN', K_RR)
  if err then return err end
end

-- write: ids into their lists before the records, then the rotation. The first write
-- is the first group's RPUSH, with pcall: it is also the type check of that list (a
-- wrong type fails it, and nothing has changed yet).
local first = ready_list(groups[1])
err = read(first, 'list', 'RPUSH', first, unpack(by_group[groups[1]]))
if err then return err end
for i = 2, #groups do
  local g = groups[i]
  redis.call('RPUSH', ready_list(g), unpack(by_group[g]))
end
if #stale > 0 then redis.call('ZREM', K_DONE, unpack(stale)) end
for i = 1, #fields, 1000 do
  redis.call('HSET', K_JOBS, unpack(fields, i, math.min(i + 999, #fields)))
end
if #offers > 0 then
  redis.call('RPUSH', K_RR, unpack(offers))
  redis.call('SADD', K_RRSET, unpack(offers))
end

-- Bookkeeping after the job changes, with pcall (as lib/core/counters.lua does): a corrupted
-- stats key cannot undo or block the enqueue.
for i = 1, #groups do
  local g = groups[i]
  if g ~= '' then redis.pcall('ZINCRBY', K_GROUPS, #by_group[g], g) end
end
redis.pcall('HINCRBY', K_STATS, 'ready', created)
redis.pcall('HINCRBY', K_STATS, 'enqueued', created)
if #offers > 0 then redis.pcall('ZADD', K_WAKE, 0, '0') end
return out
