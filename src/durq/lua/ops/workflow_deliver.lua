--[[ workflow_deliver: apply one workflow outbox entry in its target slot (idempotent).
An entry is written in one slot (by release.lua, lib/workflows/fan_in_dead.lua, purge.lua or the
fan-in engine) for another; a worker of the queue whose outbox holds it calls this script in
the target slot and releases the entry afterwards (durq.worker.outbox). A crash between
the two delivers the entry again: every order is idempotent (lib/workflows/fan_in.lua), so it is
applied once in effect.
KEYS     the key vector of the entry's target queue (lib/core/keys.lua)
ARGV[1]  the entry, NUL-separated fields, the first naming the order (run: the
         workflow's submission; an entry for another run than the workflow's changes
         nothing):
           C home wid node policy value run  a step completed with value (JSON)
           D home wid node reason run   a step was dead-lettered (reason JSON), or its
                                        dead letter was deleted while its workflow
                                        waited for it (reason "purged" or "evicted":
                                        lib/workflows/fan_in_dead.lua fan_in_gone)
           S prefix sender seq item...  start steps in queue prefix; numbered per
                                        (sender queue, prefix): applied once whenever
                                        it comes (lib/workflows/seq.lua). An item is the
                                        NUL-joined id, group, priority, max_attempts,
                                        delay_ms, expiry, link, payload
           Q prefix sender qseq (sender seq)...  consume those start entries: their
                                        workflow ended early, so applied later they
                                        start nothing; numbered itself (qseq)
           X prefix wid sender qseq id...  stop the steps (their workflow failed),
                                        once the consume numbered qseq was applied
                                        ('': none was sent): until then the entry
                                        waits (an error; the courier retries it), so
                                        a start that comes late finds its steps
                                        stopped or itself consumed, in any order
           K prefix wid sender qseq id...  the same, and flag the running steps to
                                        stop (their workflow was cancelled)
           R home wid node continue run go on starting a large node (lib/workflows/fan_in.lua
                                        wf_start); continue '1': push the next 'R' when
                                        more remain ('0': the client sends them)
           F home wid run barrier       go on gathering a large group's results
           E home wid run               go on stopping the steps of a workflow that
                                        failed or was cancelled (the next chunk)
         home / prefix is KEYS[1]: the queue the entry is for. Entries durq 0.1.0 wrote
         (for its workflows, run on in its layout: lib/workflows/legacy.lua) are applied
         too: C, D and R without the run; S whose items lack the expiry (id, group,
         priority, max_attempts, delay_ms, link, payload), without sender and number
         (applied once in effect by the record or tombstone they find, as in 0.1.0);
         X and K without sender and consume number
Returns  'OK'
Errors   DURQ_ARG for an entry of an unknown kind, malformed, or for another slot.
         DURQ_WRONGTYPE for an S entry whose queue's keys hold another Redis type
         (nothing changed: the courier retries it until they are repaired); the other
         entries never (a step stopped there is retried through the outbox).
         DURQ_WAIT for an X or K entry whose consume was not applied yet (nothing
         changed: the courier retries it).
Cost     C, D: O(1), plus FIRE_CHUNK results when a group fires; S, X, K: O(items)
         (START_CHUNK, STOP_CHUNK at most); Q: O(entries); R: O(START_CHUNK);
         F: O(FIRE_CHUNK); E: O(STOP_CHUNK)
]]
--- @include "lib/core/status"
--- @include "lib/workflows/fan_in"

local f = wf_split(ARGV[1], '\0')
if f[2] ~= K_PREFIX then
  return redis.error_reply('DURQ_ARG the entry is for ' .. tostring(f[2]) .. ', not ' .. K_PREFIX)
end
local engine = wf_engine()
local now = now_ms()
engine.set_now(now)
local op = f[1]
if op == 'C' then
  engine.completed(f[2], f[3], f[7] or '', {{f[4], f[6], f[5] == 'wait'}})
elseif op == 'D' then
  engine.died(f[2], f[3], f[6] or '', f[4], f[5])
elseif op == 'S' and wf_legacy_entry(f) then
  local items = wf_legacy_starts(f)
  local problem = engine.start_problem(items)
  if problem then return wrongtype(problem) end
  engine.enqueue_here(now, items)
  offer_touched()
  flush_counters()
  wake_if_needed()
  return 'OK'
elseif op == 'S' then
  local sender, seq, items = f[3], tonumber(f[4]), {}
  if not seq then return redis.error_reply('DURQ_ARG a start entry without its number') end
  for i = 5, #f - 7, 8 do
    items[#items + 1] = {f[i], f[i + 7], tonumber(f[i + 4]), tonumber(f[i + 2]),
      tonumber(f[i + 3]), f[i + 1], f[i + 6], f[i + 5]}
  end
  -- checked first: an entry for broken keys is retried, not half-applied or consumed
  local problem = engine.start_problem(items)
  if problem then return wrongtype(problem) end
  if wf_seq_seen(K_PREFIX, sender, seq) then return 'OK' end -- applied or consumed before
  wf_seq_mark(K_PREFIX, sender, seq)
  engine.enqueue_here(now, items)
  offer_touched()
  flush_counters()
  wake_if_needed()
  return 'OK'
elseif op == 'Q' then
  for i = 5, #f - 1, 2 do
    local seq = tonumber(f[i + 1])
    if seq and not wf_seq_seen(K_PREFIX, f[i], seq) then wf_seq_mark(K_PREFIX, f[i], seq) end
  end
  local own = tonumber(f[4])
  if own and not wf_seq_seen(K_PREFIX, f[3], own) then wf_seq_mark(K_PREFIX, f[3], own) end
elseif op == 'R' then
  engine.resume(f[2], f[3], f[6] or '', f[4], f[5] == '1')
elseif op == 'F' then
  engine.fire(f[2], f[3], f[4], f[5])
elseif op == 'E' then
  engine.stop_next(f[2], f[3], f[4])
elseif (op == 'X' or op == 'K') and wf_legacy_entry(f) then
  for i = 4, #f do engine.cancel(op, f[2], f[3], f[i]) end
elseif op == 'X' or op == 'K' then
  local q = tonumber(f[5])
  if q and not wf_seq_seen(K_PREFIX, f[4], q) then
    return redis.error_reply('DURQ_WAIT the stop of workflow ' .. f[3] ..
      ' waits for the consume of its starts (entry ' .. f[5] .. ' from ' .. f[4] .. ')')
  end
  for i = 6, #f do engine.cancel(op, f[2], f[3], f[i]) end
else
  return redis.error_reply('DURQ_ARG unknown workflow outbox entry ' .. tostring(op))
end
fan_in_flush()
return 'OK'
