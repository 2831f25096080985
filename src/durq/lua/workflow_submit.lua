--[[ workflow_submit: create a workflow in its home queue's slot and start its first steps.
The whole workflow is written in this one call: its structure (lib/fan_in.lua), the
open sets of its barriers, and its first steps, enqueued at once when their queue shares
the home's slot and otherwise handed to the home queue's outbox (the other slots' starts
are delivered from there at least once, by workflow_deliver.lua): a client that dies
after this call leaves a workflow that runs to its end, one that dies before, none.
KEYS     the home queue's key vector (lib/keys.lua)
ARGV[1]  wid: the workflow id (its steps' job ids are <wid>.<node>)
ARGV[2]  policy: fail | ignore | wait
ARGV[3]  ttl_ms: how long the result and summary are kept once it ended
ARGV[4]  plan: JSON, the structure as shown by status
ARGV[5]  Q: JSON object, queue prefix -> the leaf nodes of that queue
ARGV[6]  bars: the barrier nodes, comma separated
ARGV[7]  f: number of structure fields; ARGV[8 .. 7+2f]: field, value (t<n>, L<x>, B<b>,
         p<n>; see lib/fan_in.lua)
ARGV[8+2f] s: number of steps started now; then 7 values per step: queue prefix, node,
         group ('' = default), priority, max_attempts, delay_ms, payload (JSON)
Returns  {CREATED} or {EXISTS} when a workflow with this id exists (or ended less than
         its ttl ago): nothing changed.
Errors   none of its own; a step whose queue's keys hold another Redis type is handed to
         the outbox, which retries it until they are repaired.
Cost     O(fields + members + steps started) commands, in one call.
]]
--- @include "lib/status"
--- @include "lib/fan_in"

local wid, policy = ARGV[1], ARGV[2]
local wk = K_PREFIX .. 'wf:' .. wid
if redis.call('EXISTS', wk) == 1 then return {S_EXISTS} end
local now = now_ms()
wf_now = now
redis.call('HSET', wk, 'state', 'running', 'policy', policy, 'ttl', ARGV[3], 'created', now,
  'plan', ARGV[4], 'Q', ARGV[5], 'bars', ARGV[6])
local f = tonumber(ARGV[7])
for i = 8, 7 + 2 * f, 1000 do
  redis.call('HSET', wk, unpack(ARGV, i, math.min(i + 999, 7 + 2 * f)))
end
for b in string.gmatch(ARGV[6], '[^,]+') do
  local members = wf_split(redis.call('HGET', wk, 'B' .. b), ',')
  for c = 1, #members, 1000 do
    redis.call('SADD', wk .. ':o:' .. b, unpack(members, c, math.min(c + 999, #members)))
  end
end
redis.call('ZADD', K_PREFIX .. 'wfr', now, wid)
redis.pcall('HINCRBY', K_STATS, 'wf_started', 1)
local s0 = 8 + 2 * f
for i = 0, tonumber(ARGV[s0]) - 1 do
  local b = s0 + 1 + 7 * i
  wf_enqueue(ARGV[b], {wid .. '.' .. ARGV[b + 1], ARGV[b + 6], tonumber(ARGV[b + 5]),
    tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), ARGV[b + 2],
    wf_link(K_PREFIX, wid, ARGV[b + 1], policy)})
end
fan_in_flush()
return {S_CREATED}
