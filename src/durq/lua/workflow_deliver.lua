--[[ workflow_deliver: apply one workflow outbox entry in its target slot (idempotent).
An entry is written in one slot (by release.lua, lib/fan_in_dead.lua, purge.lua or the
fan-in engine) for another; a worker of the queue whose outbox holds it calls this script in
the target slot and releases the entry afterwards (durq.worker.outbox). A crash between
the two delivers the entry again: every order is idempotent (lib/fan_in.lua), so it is
applied once in effect.
KEYS     the key vector of the entry's target queue (lib/keys.lua)
ARGV[1]  the entry, NUL-separated fields, the first naming the order:
           C home wid node policy value  a step completed with value (JSON)
           D home wid node reason        a step was dead-lettered (reason JSON), or
                                         its dead letter was deleted while its
                                         workflow waited for it (reason "purged" or
                                         "evicted": lib/fan_in_dead.lua fan_in_gone)
           S prefix item...              start steps in queue prefix; an item is the
                                         NUL-joined id, group, priority, max_attempts,
                                         delay_ms, link, payload
           X prefix wid id...            cancel the steps (policy "fail")
           K prefix wid id...            cancel the steps and flag the running ones
                                         to stop (the workflow was cancelled:
                                         workflow_cancel.lua)
           R home wid node continue      go on starting a large node (lib/fan_in.lua
                                         wf_start); continue '1': push the next 'R'
                                         when more remain ('0': the client sends them)
         home / prefix is KEYS[1]: the queue the entry is for
Returns  'OK'
Errors   DURQ_ARG for an entry of an unknown kind or for another slot. Never
         DURQ_WRONGTYPE (its shared helper is included, not called): a step whose
         queue's keys hold another Redis type stays in the outbox until they are repaired.
Cost     C, D: O(1), plus the barrier's members when it fires; S, X, K: O(items);
         R: O(START_CHUNK)
]]
--- @include "lib/status"
--- @include "lib/fan_in"

local f = wf_split(ARGV[1], '\0')
if f[2] ~= K_PREFIX then
  return redis.error_reply('DURQ_ARG the entry is for ' .. tostring(f[2]) .. ', not ' .. K_PREFIX)
end
local engine = wf_engine()
engine.set_now(now_ms())
local op = f[1]
if op == 'C' then
  engine.completed(f[2], f[3], f[4], f[6], f[5] == 'wait')
elseif op == 'D' then
  engine.died(f[2], f[3], f[4], f[5])
elseif op == 'S' then
  for i = 3, #f - 6, 7 do
    engine.enqueue(f[2], {f[i], f[i + 6], tonumber(f[i + 4]), tonumber(f[i + 2]),
      tonumber(f[i + 3]), f[i + 1], f[i + 5]})
  end
elseif op == 'R' then
  engine.resume(f[2], f[3], f[4], f[5] == '1')
elseif op == 'X' or op == 'K' then
  for i = 4, #f do engine.cancel(f[2], f[3], f[i], op == 'K') end
else
  return redis.error_reply('DURQ_ARG unknown workflow outbox entry ' .. tostring(op))
end
fan_in_flush()
return 'OK'
