--[[ enqueue_plain: add jobs that have no delay, no priority and no dedup key, batched.
The common case of enqueue with the same results, in a few commands per batch instead of
a few per job (one HMGET and one ZMSCORE for the existence checks, one RPUSH per group,
one HSET for all records), and a script that defines only what it uses. The client picks
it when every job of the batch is plain.
KEYS     the queue key vector (lib/keys.lua)
ARGV[1]  n: number of jobs
ARGV[2+9i .. 10+9i], for job i: the nine enqueue fields (see enqueue.lua); delay,
         priority, key and replace are 0/''.
Returns  {status_1, id_1, ...}: CREATED, or EXISTS (the id exists or finished less than
         the dedup window after its enqueue, or appears earlier in the batch)
Errors   DURQ_WRONGTYPE naming the key when a durq key holds another Redis type; every
         read comes before the first write, so the call then changes nothing
Cost     O(n) work in O(1 + groups) commands.
]]
--- @include "lib/status"
--- @include "lib/keys"
--- @include "lib/clock"
--- @include "lib/record"
--- @include "lib/counters"
--- @include "lib/conf"
--- @include "lib/group_keys"
--- @include "lib/types"

local FIELDS = 9
local need_wake = false

-- redis.pcall, turning an error into a DURQ_WRONGTYPE reply naming `key` (or nil, value).
local function read(key, want, ...)
  local reply = redis.pcall(...)
  if type(reply) == 'table' and reply.err then
    local problem = type_error(key, want)
    if problem then return wrongtype(problem) end
    return redis.error_reply(reply.err) -- not about the key's type (e.g. an ACL refusal)
  end
  return nil, reply
end

-- Whether group g, about to get ready jobs, must be offered to the rotation.
local function needs_offer(g)
  local err, member = read(K_RRSET, 'set', 'SISMEMBER', K_RRSET, g)
  if err then return err end
  if member == 1 then return nil, false end
  if g == '' then return nil, true end
  local lim = tonumber(redis.call('HGET', K_GLIMIT, g)) or get_conf().group_limit
  return nil, lim <= 0 or (tonumber(redis.call('HGET', K_GACTIVE, g)) or 0) < lim
end

local function enqueue_plain(b0, n, now)
  local ids = {}
  for i = 0, n - 1 do ids[i + 1] = ARGV[b0 + FIELDS * i] end
  local err, recs = read(K_JOBS, 'hash', 'HMGET', K_JOBS, unpack(ids))
  if err then return err end
  local tombs
  err, tombs = read(K_DONE, 'zset', 'ZMSCORE', K_DONE, unpack(ids))
  if err then return err end
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
      local b = b0 + FIELDS * (i - 1)
      local g = ARGV[b + 6]
      if by_group[g] == nil then
        by_group[g] = {}
        groups[#groups + 1] = g
      end
      local list = by_group[g]
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
  local offers = {}
  for i = 1, #groups do
    local g = groups[i]
    err = read(ready_list(g), 'list', 'LLEN', ready_list(g))
    if err then return err end
    local offer
    err, offer = needs_offer(g)
    if err then return err end
    if offer then offers[#offers + 1] = g end
  end
  if #offers > 0 then
    err = read(K_RR, 'list', 'LLEN', K_RR)
    if err then return err end
  end
  -- write: ids into their lists before the records, then the rotation
  if #stale > 0 then redis.call('ZREM', K_DONE, unpack(stale)) end
  for i = 1, #groups do
    local g = groups[i]
    redis.call('RPUSH', ready_list(g), unpack(by_group[g]))
    ready_add(g, #by_group[g])
  end
  for i = 1, #fields, 1000 do
    redis.call('HSET', K_JOBS, unpack(fields, i, math.min(i + 999, #fields)))
  end
  if #offers > 0 then
    redis.call('RPUSH', K_RR, unpack(offers))
    redis.call('SADD', K_RRSET, unpack(offers))
    need_wake = true
  end
  count('enqueued', #fields / 2)
  return nil, out
end

local n = tonumber(ARGV[1])
local err, out = enqueue_plain(2, n, now_ms())
if err then return err end
flush_counters()
if need_wake then redis.pcall('ZADD', K_WAKE, 0, '0') end
return out
