--[[ workflow_submit_legacy: create a workflow in durq 0.1.0's layout (data format 1) and
start its first steps; the submit of a producer while a worker of 0.1.0 consumes one of
the workflow's queues (durq.app.fleet), so that workers of both versions run its steps:
this version through lib/workflows/legacy.lua, 0.1.0 through its own scripts. The layout
is the one 0.1.0's workflow_submit.lua wrote (lib/workflows/legacy.lua): one hash
wf:<wid> for header and structure, the open sets wf:<wid>:o:<b>, no run; its steps'
ids are <wid>.<node>, their links and outbox entries those 0.1.0 reads. The client sends,
in one round trip: HSETs of the structure (t<n>, L<x>, B<b>, p<n> without the expiry,
L0; each list in one field) into a staging hash of its own (with a TTL), then this call,
which makes the staging hash the workflow (RENAME, O(1)), creates the open sets of its
barriers and starts the first of its first steps (as workflow_submit.lua), then 'R'
orders of workflow_deliver for the rest.
KEYS     the home queue's key vector (lib/core/keys.lua)
ARGV[1]  wid: the workflow id (its steps' job ids are <wid>.<node>)
ARGV[2]  policy: fail | ignore | wait
ARGV[3]  ttl_ms: how long the result and summary are kept once it ended
ARGV[4]  plan: JSON, the structure as shown by status
ARGV[5]  Q: JSON object, queue prefix -> the leaf nodes of that queue
ARGV[6]  bars: the barrier nodes, comma separated
ARGV[7]  the staging hash holding the structure fields
Returns  {CREATED, ''}, or {EXISTS, the existing run ('' for one in this layout)} when a
         workflow with this id exists (or ended less than its ttl ago): nothing changed
         (the staging goes).
Errors   DURQ_ARG when the staging hash is missing (it expired: submit again). A step
         whose queue's keys hold another Redis type is handed to the outbox, which
         retries it until they are repaired, so never DURQ_WRONGTYPE (its shared helper
         is included, not called).
Cost     O(barriers + members / 1000) commands, plus a few per START_CHUNK steps
         started: 0.1.0's cost (its groups' members are listed in one field each).
]]
--- @include "lib/core/status"
--- @include "lib/workflows/fan_in"

local wid, policy, staged = ARGV[1], ARGV[2], ARGV[7]
local wk = K_PREFIX .. 'wf:' .. wid
if redis.call('EXISTS', wk) == 1 then
  redis.call('UNLINK', staged)
  return {S_EXISTS, redis.call('HGET', wk, 'run') or ''}
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
  local members = wf_split(redis.call('HGET', wk, 'B' .. b) or '', ',')
  for c = 1, #members, 1000 do
    redis.call('SADD', wk .. ':o:' .. b, unpack(members, c, math.min(c + 999, #members)))
  end
end
redis.call('ZADD', K_PREFIX .. 'wfr', now, wid)
redis.pcall('HINCRBY', K_STATS, 'wf_started', 1)
local w = engine.ctx(K_PREFIX, wid, '')
w.policy = policy
engine.start(w, '0', nil, true)
fan_in_flush()
return {S_CREATED, ''}
