--[[ workflow_submit: create a workflow in its home queue's slot and start its first steps.
The client sends, in one round trip: HSETs of the workflow's structure (lib/fan_in.lua:
targets, barriers, parked steps) into a staging hash of its own (with a TTL), then this
call, which makes the staging hash the workflow (RENAME, O(1)), creates the open sets
of its barriers and starts the first of its first steps (enqueued at once when their
queue shares the home's slot, else handed to the home queue's outbox, delivered from
there at least once by workflow_deliver.lua), then, for a workflow with more first
steps than START_CHUNK, 'R' orders of workflow_deliver that start the rest. Each call is
short; this one is the commit: a client that dies before it leaves a staging hash that
expires, one that dies after it a workflow that runs to its end (an outbox entry
continues the first steps the client did not start).
KEYS     the home queue's key vector (lib/keys.lua)
ARGV[1]  wid: the workflow id (its steps' job ids are <wid>.<node>)
ARGV[2]  policy: fail | ignore | wait
ARGV[3]  ttl_ms: how long the result and summary are kept once it ended
ARGV[4]  plan: JSON, the structure as shown by status
ARGV[5]  Q: JSON object, queue prefix -> the leaf nodes of that queue
ARGV[6]  bars: the barrier nodes, comma separated
ARGV[7]  the staging hash holding the structure fields (t<n>, L<x>, B<b>, p<n>, L0)
Returns  {CREATED} or {EXISTS} when a workflow with this id exists (or ended less than
         its ttl ago): nothing changed.
Errors   DURQ_ARG when the staging hash is missing (it expired: submit again). A step
         whose queue's keys hold another Redis type is handed to the outbox, which
         retries it until they are repaired, so never DURQ_WRONGTYPE (its shared helper
         is included, not called).
Cost     O(barriers + members / 1000) commands, plus a few per START_CHUNK steps started.
]]
--- @include "lib/status"
--- @include "lib/fan_in"

local wid, policy, staged = ARGV[1], ARGV[2], ARGV[7]
local wk = K_PREFIX .. 'wf:' .. wid
if redis.call('EXISTS', wk) == 1 then
  redis.call('DEL', staged)
  return {S_EXISTS}
end
if redis.call('EXISTS', staged) == 0 then
  return redis.error_reply('DURQ_ARG the staged workflow ' .. wid .. ' is gone: submit again')
end
local now = now_ms()
local engine = wf_engine()
engine.set_now(now)
redis.call('RENAME', staged, wk)
redis.call('PERSIST', wk)
redis.call('HSET', wk, 'state', 'running', 'policy', policy, 'ttl', ARGV[3], 'created', now,
  'plan', ARGV[4], 'Q', ARGV[5], 'bars', ARGV[6])
for b in string.gmatch(ARGV[6], '[^,]+') do
  local members = wf_split(redis.call('HGET', wk, 'B' .. b), ',')
  for c = 1, #members, 1000 do
    redis.call('SADD', wk .. ':o:' .. b, unpack(members, c, math.min(c + 999, #members)))
  end
end
redis.call('ZADD', K_PREFIX .. 'wfr', now, wid)
redis.pcall('HINCRBY', K_STATS, 'wf_started', 1)
engine.start(K_PREFIX, wid, wk, '0', nil, true)
fan_in_flush()
return {S_CREATED}
