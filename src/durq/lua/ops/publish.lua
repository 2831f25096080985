--[[ publish: enqueue jobs into every subscriber queue of a topic, each job in one atomic step.
A topic "t" keeps its subscribers (the names of its subscriptions) in a set; the queue of
subscription "s" is the queue named "t/s", whose keys share the topic's hash tag, so the
whole fan-out happens in one slot. Each subscriber queue is a full durq queue: its own
leases, retries, dead letters, groups and priorities. A subscriber added later receives
only what is published after it subscribed.
KEYS[1]  the topic's subscriber set   <ns>:{t}:topic:subs
KEYS[2]  the topic base <ns>:{t}, never a key: while a Redis Cluster migrates the slot,
         the missing key makes the server redirect the call instead of running it on
         half-moved subscriber queues (whose keys it does not declare)
ARGV[1]  the topic base               <ns>:{t}   (a subscription's prefix is base/s:)
ARGV[2]  n: number of jobs
ARGV[3+9i .. 11+9i], for job i: the nine enqueue fields (see enqueue.lua)
Returns  {k, subscriber_1, status_1, ref_1, ...}: the call published the first k of the n
         jobs (as many as keep it near PUBLISH_WORK copies of work, at least one: the
         caller sends the rest again), then for each subscriber (sorted), for each of the
         k jobs, as enqueue. Every subscriber gets the same job id, so publishing an id again is a
         no-op in each subscriber queue.
Errors   DURQ_WRONGTYPE when a key of a subscriber queue holds another Redis type:
         checked in every subscriber queue first, so the call changes nothing
Cost     O(subscribers * (k + 3)) commands: about 1 ms when (k + 2) * subscribers <=
         PUBLISH_WORK, or with k = 1 and MAX_SUBSCRIBERS (50, durq.Topic.subscribe);
         memory: one copy of the payload per subscriber.
]]
--- @include "lib/core/status"
--- @include "lib/core/keys"
--- @include "lib/core/bind_prefix"
--- @include "lib/core/clock"
--- @include "lib/core/conf"
--- @include "lib/core/record"
--- @include "lib/core/counters"
--- @include "lib/groups/push"
--- @include "lib/groups/offer"
--- @include "lib/core/delayed"
--- @include "lib/core/reason"
--- @include "lib/core/enqueue_one"

-- job copies one call makes at most (a subscriber's own checks and counters cost about
-- two more), but always one job to every subscriber
local PUBLISH_WORK = 128

local subs = redis.call('SMEMBERS', KEYS[1])
table.sort(subs)
local base = ARGV[1]
local n = tonumber(ARGV[2])
if #subs > 0 then n = math.min(n, math.max(1, math.floor(PUBLISH_WORK / #subs) - 2)) end
for s = 1, #subs do
  bind_prefix(base .. '/' .. subs[s] .. ':')
  local problem = enqueue_problem(3, n)
  if problem then return wrongtype(problem) end
end
local now = now_ms()
local out = {n}
for s = 1, #subs do
  bind_prefix(base .. '/' .. subs[s] .. ':')
  -- per-queue state kept by the included helpers starts afresh for each subscriber
  counts, ready_delta, ready_groups = {}, {}, {}
  touched, touched_list, need_wake = {}, {}, false
  earliest_due, conf_cache = nil, nil
  for i = 0, n - 1 do
    local b = 3 + ENQUEUE_FIELDS * i
    local status, ref = enqueue_one(now, ARGV[b], ARGV[b + 1], delay_of(ARGV[b + 2], now),
      tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5]), ARGV[b + 6],
      ARGV[b + 7], ARGV[b + 8])
    out[#out + 1] = subs[s]
    out[#out + 1] = status
    out[#out + 1] = ref
  end
  offer_touched()
  flush_counters()
  wake_if_needed()
end
return out
