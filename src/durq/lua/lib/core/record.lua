-- Reading and rewriting job records (the layout, and rec_new that writes a new one, are
-- in lib/core/record_layout.lua, which a script that only creates records includes alone).
--- @include "lib/core/record_layout"
--- @include "lib/core/record_peek"

local function rec_decode(raw)
  if type(raw) ~= 'string' or #raw < REC_FIXED + 2 then return nil end
  local ok, ver, state, prio, codec, attempts, maxatt, deliveries, failures, enq, deq, req,
    flags = pcall(struct.unpack, REC_FMT, raw)
  if not ok or ver ~= REC_VERSION or state < ST_PENDING or state > ST_HELD then
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

local function rec_token(r)
  return rec_token_of(r.deliveries, r.deq)
end

local function rec_returning(r)
  return bit.band(r.flags, FLAG_RETURNING) ~= 0
end

local function rec_has_slot(r)
  return bit.band(r.flags, FLAG_SLOT) ~= 0
end
