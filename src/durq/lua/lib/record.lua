-- A job record, the value of K_JOBS[id]: a fixed binary header, then the group, the
-- dedup key and the payload. Layout (big-endian), mirrored by durq.protocol.record:
--   B version  B state  b priority  B codec  H attempts  H max_attempts  I4 deliveries
--   H failures  I6 enqueued_at  I6 dequeued_at  I6 requeued_at  B flags      (33 bytes)
--   B len(group) group  B len(key) key  payload
-- attempts counts the attempts that count toward max_attempts (a defer gives one back);
-- deliveries counts every hand-out. The lease token is "<deliveries>.<dequeued_at>":
-- it changes on every delivery, so a worker whose lease was taken over cannot use it.
local REC_FMT = '>BBbBHHIHI6I6I6B'
local REC_FIXED = 33
local REC_VERSION = 1

local ST_PENDING = 1
local ST_DELAYED = 2
local ST_ACTIVE = 3
local ST_DEAD = 4
local ST_COMPLETED = 5
local ST_SUPERSEDED = 6

-- The job was started before and is waiting to come back (retry, defer): it returns to
-- the head of its group.
local FLAG_RETURNING = 1
-- The job holds one of its named group's slots (counted in K_GACTIVE). Slots are counted
-- only while the queue has group limits; the flag keeps the count exact when limits are
-- set or removed while jobs run.
local FLAG_SLOT = 2

local function rec_decode(raw)
  if type(raw) ~= 'string' or #raw < REC_FIXED + 2 then return nil end
  local ok, ver, state, prio, codec, attempts, maxatt, deliveries, failures, enq, deq, req,
    flags = pcall(struct.unpack, REC_FMT, raw)
  if not ok or ver ~= REC_VERSION or state < ST_PENDING or state > ST_SUPERSEDED then
    return nil
  end
  local glen = string.byte(raw, REC_FIXED + 1)
  local kpos = REC_FIXED + 2 + glen
  local klen = string.byte(raw, kpos)
  if klen == nil or kpos + klen > #raw then return nil end
  return {
    state = state, prio = prio, codec = codec, attempts = attempts, max = maxatt,
    deliveries = deliveries, failures = failures, enq = enq, deq = deq, req = req,
    flags = flags,
    group = string.sub(raw, REC_FIXED + 2, REC_FIXED + 1 + glen),
    key = string.sub(raw, kpos + 1, kpos + klen),
    tail = string.sub(raw, REC_FIXED + 1),
  }
end

local function rec_encode(r)
  return struct.pack(REC_FMT, REC_VERSION, r.state, r.prio, r.codec, r.attempts, r.max,
    r.deliveries, r.failures, r.enq, r.deq, r.req, r.flags) .. r.tail
end

local function rec_new(state, prio, codec, maxatt, now, group, key, payload)
  local head = struct.pack(REC_FMT, REC_VERSION, state, prio, codec, 0, maxatt, 0, 0, now,
    0, 0, 0)
  return head .. string.char(#group) .. group .. string.char(#key) .. key .. payload
end

local function rec_token(r)
  return string.format('%d.%d', r.deliveries, r.deq)
end

local function rec_returning(r)
  return bit.band(r.flags, FLAG_RETURNING) ~= 0
end

local function rec_has_slot(r)
  return bit.band(r.flags, FLAG_SLOT) ~= 0
end
