-- The records of steps:<id> (lib/durable/steps.lua), JSON whose first field is the kind,
-- so a script tells them apart without decoding a value it never needs to read (a
-- step's result or a signal's payload is spliced as the client sent it, never decoded
-- here: cjson would round big numbers). Mirrored by durq.protocol.durable.
--   {"k":"step","at":ms,"ms":run ms,"n":tries,"v":result}       a step completed
--   {"k":"sleep","u":until ms,"at":ms}                           a sleep reached
--   {"k":"wait","s":signal,"u":deadline ms (0: none),"d":due ms,"at":ms}
--                                                                a wait under way
--   {"k":"signal","s":signal,"i":signal id,"at":ms,"v":payload}  a wait's signal came
--   {"k":"timeout","s":signal,"u":deadline ms,"at":ms}           a wait timed out
-- The last two are a wait's outcome: written once, never changed after.

-- The kind of a stored record, or nil when there is none (or it is not one of durq's).
local function step_kind(raw)
  if type(raw) ~= 'string' then return nil end
  return string.match(raw, '^{"k":"(%a+)"')
end

-- The fields of a small record (sleep, wait, timeout), or nil when it cannot be read.
local function step_fields(raw)
  local ok, data = pcall(cjson.decode, raw)
  if ok and type(data) == 'table' then return data end
  return nil
end

local function sleep_record(untl, now)
  return '{"k":"sleep","u":' .. string.format('%d', untl)
    .. ',"at":' .. string.format('%d', now) .. '}'
end

local function wait_record(signal, deadline, due, now)
  return '{"k":"wait","s":' .. cjson.encode(signal) .. ',"u":' .. string.format('%d', deadline)
    .. ',"d":' .. string.format('%d', due) .. ',"at":' .. string.format('%d', now) .. '}'
end

local function timeout_record(signal, deadline, now)
  return '{"k":"timeout","s":' .. cjson.encode(signal) .. ',"u":'
    .. string.format('%d', deadline) .. ',"at":' .. string.format('%d', now) .. '}'
end

-- `payload` is the JSON text the sender gave (checked by its client), spliced as is
local function signal_record(signal, sid, payload, now)
  return '{"k":"signal","s":' .. cjson.encode(signal) .. ',"i":' .. cjson.encode(sid)
    .. ',"at":' .. string.format('%d', now) .. ',"v":' .. payload .. '}'
end
