--- @include "lib/core/keys"
--- @include "lib/groups/offer"
--- @include "lib/limits/conf"
--- @include "lib/core/type_check"
--- @include "lib/core/outbox"

-- A pause of a whole queue (durq.RateLimited, scope 'queue'; docs/flow-control.md). The
-- queue limiter's TAT (lib/limits/rate_limit.lua) moves to `till` (ms, server time) plus the
-- rate's burst tolerance, unless it is later already; one consumer is woken to park the
-- queue and plan the wake-up (the alarm, lib/limits/gate.lua). A TAT only ever moves later, so
-- a pause applied twice is applied once.
-- A sharded queue is paused in every shard. Its shards live in other Cluster slots: the
-- shard where the task raised writes one order per other shard into its outbox
-- (lib/core/outbox.lua, delivered at least once by its workers), and limits_pause.lua applies
-- each in its shard. The flow hash's 'qfan' is the latest end of a pause this shard sent
-- to its siblings or received from one: a pause that ends at most a tenth of its length
-- later is not sent again, so a burst of RateLimited over all the shards (each had jobs
-- running when the first paused) sends about one pause, not one per job and shard.
local function queue_pause(f, now, till)
  f.tat = gcra_pause(f.tat, f.qrate, now, till - now)
  redis.call('HSET', K_PREFIX .. 'flow', 'tat', tat_text(f.tat))
  need_wake = true
end

-- The end of the latest pause known to this shard's siblings (ms; 0: none).
local function queue_pause_sent()
  return tonumber(redis.call('HGET', K_PREFIX .. 'flow', 'qfan')) or 0
end

local function queue_pause_note(till)
  if till > queue_pause_sent() then
    redis.call('HSET', K_PREFIX .. 'flow', 'qfan', string.format('%d', till))
  end
end

-- The outbox keys queue_pause_send writes (lib/core/outbox.lua) that hold another Redis type:
-- the problem, or nil (lib/core/type_check.lua).
local function queue_pause_outbox_error()
  local p = K_PREFIX .. OUTBOX_PART
  return type_error(p .. 'jobs', 'hash') or type_error(p .. 'pending', 'list')
    or type_error(p .. 'rr', 'list') or type_error(p .. 'rrset', 'set')
end

-- Send the pause that ends at `till` (`ms` long) to the other shards of the queue, whose
-- prefixes are `others` (none: a plain queue): one outbox entry each, 'P', the shard's
-- prefix, the end (NUL-separated), unless they know of one nearly as long (above).
local function queue_pause_send(now, till, ms, others)
  if #others == 0 or till <= queue_pause_sent() + ms / 10 then return end
  queue_pause_note(till)
  local ends = string.format('%d', till)
  for j = 1, #others do
    outbox_push(K_PREFIX, 'pause:' .. ends .. ':' .. j, 'P\0' .. others[j] .. '\0' .. ends, now)
  end
end
