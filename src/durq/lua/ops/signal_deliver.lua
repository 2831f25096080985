--[[ signal_deliver: apply a signal in one queue or shard from an outbox entry 'G' that
signal.lua (or this script, for waiters beyond the WAKE_MAX a call wakes) wrote in
another slot or in this one, delivered at least once by the workers of the queue whose
outbox holds it (durq.worker.outbox). Idempotent (lib/durable/signal.lua): applied
again, however late, it changes nothing.
KEYS     the key vector of the entry's queue (lib/core/keys.lua)
ARGV[1]  the entry: 'G', the queue's prefix, the signal's name, id, send time (ms, the
         sending shard's server clock) and ttl (ms), its payload; NUL-separated
Returns  'OK'
Effects  as signal.lua in its queue; waiters left beyond WAKE_MAX: a new entry for this
         queue in its outbox
Errors   DURQ_ARG for an entry of another kind or for another slot; DURQ_WRONGTYPE when a
         key it uses holds another Redis type, before any change (the courier retries it)
Cost     O(WAKE_MAX) commands; at most WAKE_BYTES (512 KiB) of payload copied into
         waiters' records (lib/durable/signal.lua).
]]
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/record_layout"
--- @include "lib/core/outbox"
--- @include "lib/durable/signal"

local prefix, name, sid, at, ttl, payload =
  string.match(ARGV[1], '^G%z([^%z]*)%z([^%z]*)%z([^%z]*)%z(%d+)%z(%d+)%z(.*)$')
if not prefix then
  return redis.error_reply('DURQ_ARG not a signal entry')
end
if prefix ~= K_PREFIX then
  return redis.error_reply('DURQ_ARG the entry is for ' .. prefix .. ', not ' .. K_PREFIX)
end
local now = now_ms()
local woken, left = signal_apply(name, sid, tonumber(at), tonumber(ttl), payload, now)
if woken == nil then return wrongtype(left) end
if left then outbox_push(K_PREFIX, 'sig:' .. sid .. '+', ARGV[1], now) end
offer_touched()
flush_counters()
wake_if_needed()
return 'OK'
