--[[ workflow_submit: create a workflow in its home queue's slot and start its first steps.
The client sends, in one round trip: HSETs of the workflow's header (its plan) and of
its structure (lib/workflows/fan_in.lua: targets, barriers and their open counts, parked steps,
stop chunks) into staging hashes of its own (with a TTL), then this call, which makes
them the workflow's header and the structure of this run (RENAME, O(1) each) and starts
the first of its first steps (enqueued at once when their queue shares the home's slot,
else handed to the home queue's outbox, delivered from there at least once by
workflow_deliver.lua), then, for a workflow with more first steps than START_CHUNK, 'R'
orders of workflow_deliver that start the rest. Each call is short; this one is the
commit: a client that dies before it leaves staging hashes that expire, one that dies
after it a workflow that runs to its end (an outbox entry continues the first steps the
client did not start).
KEYS     the home queue's key vector (lib/core/keys.lua)
ARGV[1]  wid: the workflow id (its steps' job ids are <wid>.<run>.<node>)
ARGV[2]  policy: fail | ignore | wait
ARGV[3]  ttl_ms: how long the result and summary are kept once it ended
ARGV[4]  run: this submission's tag (8 characters, drawn by the client)
ARGV[5]  the staging hash of the header (plan)
ARGV[6]  the staging hash of the structure (t<n>, L<x>, B<b>, N<b>, p<n>, L0, Q<k>, Q, P)
Returns  {CREATED, run}, or {EXISTS, the existing run} when a workflow with this id
         exists (or ended less than its ttl ago): nothing changed (the staging goes).
Errors   DURQ_ARG when a staging hash is missing (it expired: submit again). A step
         whose queue's keys hold another Redis type is handed to the outbox, which
         retries it until they are repaired, so never DURQ_WRONGTYPE (its shared helper
         is included, not called).
Cost     O(1) commands, plus a few per START_CHUNK steps started.
]]
--- @include "lib/core/status"
--- @include "lib/workflows/fan_in"

local wid, policy, ttl, run, head, body = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local wk = K_PREFIX .. 'wf:' .. wid
if redis.call('EXISTS', wk) == 1 then
  redis.call('UNLINK', head, body)
  return {S_EXISTS, redis.call('HGET', wk, 'run') or ''}
end
if redis.call('EXISTS', head) == 0 or redis.call('EXISTS', body) == 0 then
  redis.call('UNLINK', head, body)
  return redis.error_reply('DURQ_ARG the staged workflow ' .. wid .. ' is gone: submit again')
end
local now = now_ms()
local engine = wf_engine()
engine.set_now(now)
local w = engine.ctx(K_PREFIX, wid, run)
w.policy = policy
redis.call('RENAME', head, wk)
redis.call('PERSIST', wk)
redis.call('HSET', wk, 'state', 'running', 'policy', policy, 'ttl', ttl, 'created', now,
  'run', run)
redis.call('RENAME', body, w.ws)
redis.call('PERSIST', w.ws)
redis.call('ZADD', K_PREFIX .. 'wfr', now, wid)
redis.pcall('HINCRBY', K_STATS, 'wf_started', 1)
engine.start(w, '0', nil, true)
fan_in_flush()
return {S_CREATED, run}
