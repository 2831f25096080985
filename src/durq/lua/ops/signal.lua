--[[ signal: send signal `name` to a queue (a plain queue, or a sharded queue through one
of its shards): kept there for its ttl, it wakes every job waiting for it
(lib/durable/signal.lua), and a wait reached later gets it at once (step_wait.lua).
The other shards of a sharded queue get it through this shard's outbox, delivered at
least once to signal_deliver.lua; so do this shard's waiters beyond the WAKE_MAX a call
wakes. Idempotent by the signal's id: sent again (a client's retry) it changes nothing.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  name, ARGV[2] the signal's id, ARGV[3] ttl (ms, > 0)
ARGV[4]  payload (JSON text)
ARGV[5..] the prefixes of the other shards that get it (none for a plain queue)
Returns  {woken, sent at (ms)}: the jobs of this queue or shard made ready now; the
         send time is the server's, or 1 ms after the signal kept here when that one is
         as recent (the newest signal of a name, kept everywhere, is the last sent)
Errors   DURQ_WRONGTYPE when a key it uses holds another Redis type, before any change
Cost     O(WAKE_MAX + other shards) commands; at most WAKE_BYTES (512 KiB) of payload
         copied into waiters' records (lib/durable/signal.lua).
]]
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/record_layout"
--- @include "lib/core/outbox"
--- @include "lib/durable/signal"

local name, sid, ttl, payload = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local now = now_ms()
local sk = K_PREFIX .. 'sig:' .. name
local problem = type_error(sk, 'hash')
if problem then return wrongtype(problem) end
-- its send time orders it among the signals of its name everywhere (signal_apply keeps
-- the newest): after the one kept here, even within the same millisecond
local at = now
local kept = redis.call('HMGET', sk, 'i', 'a')
if kept[1] and kept[1] ~= sid and tonumber(kept[2]) and tonumber(kept[2]) >= now then
  at = tonumber(kept[2]) + 1
end
local woken, left = signal_apply(name, sid, at, ttl, payload, now)
if woken == nil then return wrongtype(left) end
local tail = '\0' .. name .. '\0' .. sid .. '\0' .. string.format('%d', at) .. '\0'
  .. string.format('%d', ttl) .. '\0' .. payload
for i = 5, #ARGV do
  outbox_push(K_PREFIX, 'sig:' .. sid .. '@' .. ARGV[i], 'G\0' .. ARGV[i] .. tail, now)
end
if left then outbox_push(K_PREFIX, 'sig:' .. sid .. '+', 'G\0' .. K_PREFIX .. tail, now) end
offer_touched()
flush_counters()
wake_if_needed()
return {woken, at}
