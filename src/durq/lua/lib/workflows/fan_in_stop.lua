--- @include "lib/core/keys"
--- @include "lib/core/outbox"
--- @include "lib/workflows/link"
--- @include "lib/workflows/seq"
--- @include "lib/workflows/stop"

-- Stopping the steps of a workflow run that failed (policy "fail") or was cancelled, a
-- chunk at a time (lib/workflows/fan_in.lua keeps the run; these are its stop's two halves). The
-- chunks were made by the client at submit (durq.protocol.workflows.compile_workflow):
-- Q<k> = queue prefix, '1' when it is that queue's last chunk, its steps; Q their number,
-- P the workflow's queues. While it stops, the structure holds `stop` ('X' failed, 'K'
-- cancelled), `x`, the next chunk, and q<prefix>, the number of the 'Q' entry sent to
-- each queue of another slot that its starts went to.
local WF_STOP_CHUNK = 50 -- durq.protocol.workflows.STOP_CHUNK (steps per call, about)

-- Made by the engine on first use (its functions cost nothing to calls that stop
-- nothing), with E: here(prefix) (its slot is the script's), hmget, stops_of(kind,
-- prefix) (the steps to stop there, applied by the engine's flush), now.
local function wf_stop_build(E)
  -- The next chunks of a run that stops (Q<k>, WF_STOP_CHUNK steps of one queue each, until
  -- WF_STOP_CHUNK steps were looked at in this call): parked ones never start (nothing to
  -- do: the run no longer runs); the others are stopped in their queues (wf_cancel_one).
  -- After a queue's last chunk its guard goes; after the last chunk the structure goes;
  -- until then the stop continues through the outbox ('E').
  local function wf_stop_next(w)
    local st = redis.call('HMGET', w.ws, 'stop', 'x', 'Q')
    local kind, k, total = st[1], tonumber(st[2]), tonumber(st[3]) or 0
    if not kind or not k or k > total then return end
    local seen = 0
    while k <= total and seen < WF_STOP_CHUNK do
      local f = wf_split(redis.call('HGET', w.ws, 'Q' .. k) or '\0\0', '\0')
      local prefix, leaves = f[1], wf_split(f[3] or '', ',')
      local fields = {}
      for i = 1, #leaves do fields[i] = 'p' .. leaves[i] end
      local specs = E.hmget(w.ws, fields)
      local bucket = E.stops_of(kind, prefix)
      if bucket.q == nil and not E.here(prefix) then
        -- the number of the consume its stop entry waits for ('': none was sent)
        bucket.q = redis.call('HGET', w.ws, 'q' .. prefix) or ''
        bucket.sender = w.home
      end
      for i = 1, #leaves do
        if not specs[i] and leaves[i] ~= '' then
          bucket.items[#bucket.items + 1] = {w.wid, w.sid .. '.' .. leaves[i]}
        end
      end
      if f[2] == '1' and E.here(prefix) then bucket.clear[#bucket.clear + 1] = w.sid end
      seen = seen + #leaves
      k = k + 1
    end
    if k > total then
      redis.call('UNLINK', w.ws)
    else
      redis.call('HSET', w.ws, 'x', k)
      outbox_push(w.home, 'e:' .. w.sid .. ':' .. k,
        table.concat({'E', w.home, w.wid, w.run}, '\0'), E.now)
    end
  end

  -- A run that ends early (kind 'X': failed, 'K': cancelled) begins to stop its steps:
  -- the guards of its queues in this slot go up (so none of its steps starts there from
  -- now on), its starts still on their way to other slots are consumed ('Q' entries),
  -- the partial result lists being gathered go, and the first chunk is stopped. The done
  -- set stays as long as the summary: status() tells a step that finished from one that
  -- never ran by it.
  local function wf_stop_begin(w, kind, ttl)
    redis.call('HSET', w.ws, 'stop', kind, 'x', 1)
    redis.call('SADD', w.wd, '0')
    redis.call('PEXPIRE', w.wd, ttl)
    for b in string.gmatch(redis.call('HGET', w.ws, 'F') or '', '[^,]+') do
      redis.call('UNLINK', w.home .. 'wfa:' .. w.run .. ':' .. b .. ':' .. w.wid)
    end
    local prefixes = wf_split(redis.call('HGET', w.ws, 'P') or '', '\0')
    local fields = {}
    for i = 1, #prefixes do fields[i] = 's' .. prefixes[i] end
    local sent = E.hmget(w.ws, fields)
    for i = 1, #prefixes do
      local p = prefixes[i]
      local here = E.here(p)
      if here and p ~= '' then
        redis.call('HSET', p .. WF_GUARDS, w.sid, kind .. '\t' .. w.wid)
      end
      if sent[i] then
        -- the consume is numbered as the starts are: the stop entries for that queue
        -- wait until it was applied there (workflow_deliver.lua), so a start that comes
        -- back late finds either its steps stopped or itself consumed
        local q = here and '' or wf_seq_next(w.home, p)
        local parts = {'Q', p, w.home, q}
        for pair in string.gmatch(sent[i], '[^,]+') do
          local sender, seq = string.match(pair, '^(.*)\t(%d+)$')
          if here and not wf_seq_seen(p, sender, tonumber(seq)) then
            wf_seq_mark(p, sender, tonumber(seq))
          end
          parts[#parts + 1] = sender
          parts[#parts + 1] = seq
        end
        if not here then
          redis.call('HSET', w.ws, 'q' .. p, q)
          outbox_push(w.home, 'q:' .. w.sid .. ':' .. p, table.concat(parts, '\0'), E.now)
        end
      end
    end
    wf_stop_next(w)
  end

  return {begin = wf_stop_begin, next = wf_stop_next}
end
