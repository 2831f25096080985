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
  if state == ST_DELAYED and flags >= FLAG_HELD and bit.band(flags, FLAG_HELD) ~= 0 then
    state = ST_HELD -- stored as delayed, for durq 0.1.0 (lib/core/record_layout.lua)
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
  local state, flags = r.state, r.flags
  if state == ST_HELD then
    state, flags = ST_DELAYED, bit.bor(flags, FLAG_HELD)
  elseif flags >= FLAG_HELD then
    flags = bit.band(flags, bit.bnot(FLAG_HELD))
  end
  return struct.pack(REC_FMT, REC_VERSION, state, r.prio, r.codec, r.attempts, r.max,
    r.deliveries, r.failures, r.enq, r.deq, r.req, flags) .. r.tail
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
