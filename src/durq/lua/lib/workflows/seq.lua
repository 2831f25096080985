-- Starts of workflow steps in another slot travel as 'S' outbox entries (lib/workflows/fan_in.lua),
-- delivered at least once, by couriers that may be slow or dead: an entry can come back
-- long after it was applied, even once its workflow ended and every record of its
-- steps is gone. So applying one twice must be ruled out by something that does not
-- lapse: each entry is numbered, per (sending queue, target queue), from a counter in
-- the sender's slot, and the target remembers which numbers it applied:
--   <sender prefix>wfq          hash  target prefix -> the last number given
--   <target prefix>wfi          hash  sender prefix -> watermark: every number up to it
--                                     was applied (or consumed, see below)
--   <target prefix>wfi:<sender> set   the numbers above the watermark applied so far
-- Entries mostly arrive in order, so the set stays small: each mark moves the watermark
-- over the numbers it holds (at most WF_SEQ_STEP per call, so a late gap costs no long
-- call). A workflow that ends early consumes the numbers of its starts still on their
-- way ('Q' entries): applied later, they start nothing. Numbers are per queue pair, not
-- per workflow, so this state does not grow with workflows; a start entry that is never
-- applied (dead-lettered in its outbox) holds the watermark until it is replayed, and
-- the numbers after it are kept one by one meanwhile.
local WF_SEQ_STEP = 100

-- In the sender's slot: the number of the next entry from `sender` to `target`.
local function wf_seq_next(sender, target)
  return redis.call('HINCRBY', sender .. 'wfq', target, 1)
end

-- In the target's slot: whether entry `seq` from `sender` was applied or consumed.
local function wf_seq_seen(target, sender, seq)
  local low = tonumber(redis.call('HGET', target .. 'wfi', sender)) or 0
  if seq <= low then return true end
  return redis.call('SISMEMBER', target .. 'wfi:' .. sender, seq) == 1
end

-- In the target's slot: entry `seq` from `sender` (not seen) is applied or consumed now.
local function wf_seq_mark(target, sender, seq)
  local hk, sk = target .. 'wfi', target .. 'wfi:' .. sender
  local low = tonumber(redis.call('HGET', hk, sender)) or 0
  local moved = false
  if seq == low + 1 then
    low, moved = seq, true
  else
    redis.call('SADD', sk, seq)
  end
  for _ = 1, WF_SEQ_STEP do
    if redis.call('SREM', sk, low + 1) == 0 then break end
    low, moved = low + 1, true
  end
  if moved then redis.call('HSET', hk, sender, low) end
end
