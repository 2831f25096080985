--- @include "lib/core/record_layout"

-- A record's fixed header as plain values, for the per-job loops of release and dequeue:
-- rec_decode (lib/core/record.lua) builds a table and copies the group, the key and the
-- payload out of every record, a cost per job (docs/decisions/) that these loops, which need a few
-- header fields, do not have to pay. It refuses exactly what rec_decode refuses (same
-- checks), returning nil; else the header fields in layout order (version first), then
-- the position of the key's length byte and that length (the key is
-- string.sub(raw, kpos + 1, kpos + klen), the group string.sub(raw, REC_FIXED + 2,
-- kpos - 1)).
local function rec_peek(raw)
  if type(raw) ~= 'string' or #raw < REC_FIXED + 2 then return nil end
  -- no pcall: the header has a fixed size, and the string is longer than it
  local ver, state, prio, codec, attempts, maxatt, deliveries, failures, enq, deq, req,
    flags = struct.unpack(REC_FMT, raw)
  if ver ~= REC_VERSION or state < ST_PENDING or state > ST_HELD then return nil end
  if state == ST_DELAYED and flags >= FLAG_HELD and bit.band(flags, FLAG_HELD) ~= 0 then
    state = ST_HELD -- as rec_decode reads it
  end
  local kpos = REC_FIXED + 2 + string.byte(raw, REC_FIXED + 1)
  local klen = string.byte(raw, kpos)
  if klen == nil or kpos + klen > #raw then return nil end
  return ver, state, prio, codec, attempts, maxatt, deliveries, failures, enq, deq, req,
    flags, kpos, klen
end

-- The lease token of a record whose deliveries and dequeued_at are given (rec_token,
-- lib/core/record.lua, is this of a decoded record).
local function rec_token_of(deliveries, deq)
  return string.format('%d.%d', deliveries, deq)
end
