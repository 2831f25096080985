--- @include "lib/core/keys"
--- @include "lib/core/record"
--- @include "lib/core/make_ready"
--- @include "lib/core/types"
--- @include "lib/durable/steps"
--- @include "lib/durable/record"

-- A signal reaches one queue (or shard): it is kept, and it wakes the jobs waiting for it
-- there (docs/durable.md). Applied by signal.lua (from a client) and signal_deliver.lua
-- (from the outbox of another shard); idempotent by the signal's id and send time, so an
-- outbox entry applied again, however late, changes nothing: a signal applied again
-- while kept finds its own id; one whose ttl has run out (counted from when it was sent)
-- is dropped; an older one than the signal kept is dropped too (the newest is kept).

-- the waiters a call wakes at most (about 10 commands each); the rest go on through the
-- queue's outbox (an entry of the same signal for this slot)
local WAKE_MAX = 100
-- the payload bytes a call copies into waiters' records at most: a 64 KiB payload wakes
-- 8 waiters a call (100 of them copied 6.4 MB and took 20 ms)
local WAKE_BYTES = 512 * 1024

-- Apply signal `name` (id `sid`, sent at `at` ms, kept `ttl` ms, JSON `payload`) at
-- server time `now`. Returns the jobs woken and whether waiters are left for another
-- call, or nil and the problem when a key holds another Redis type (nothing changed).
local function signal_apply(name, sid, at, ttl, payload, now)
  if now >= at + ttl then return 0, false end -- its time is over: never kept, wakes none
  local sk = K_PREFIX .. 'sig:' .. name
  local wk = K_PREFIX .. 'sw:' .. name
  local problem = type_error(sk, 'hash') or type_error(wk, 'hash')
    or keys_error({'jobs', 'delayed', 'rr', 'rrset', 'stats', 'groups'})
  if problem then return nil, problem end
  local kept = redis.call('HMGET', sk, 'i', 'a')
  local kept_at = tonumber(kept[2])
  if kept_at and (kept_at > at or (kept_at == at and kept[1] > sid)) then
    return 0, false -- a newer signal is kept: this one woke its waiters before it came
  end
  if kept[1] ~= sid then
    redis.call('HSET', sk, 'i', sid, 'a', string.format('%d', at), 'p', payload)
    redis.call('PEXPIREAT', sk, at + ttl)
  end
  local most = math.max(1, math.min(WAKE_MAX, math.floor(WAKE_BYTES / math.max(#payload, 1))))
  local found = redis.call('HRANDFIELD', wk, most, 'WITHVALUES')
  if #found == 0 then return 0, false end
  -- checked first, written after: a waiter whose group's keys hold another type gets
  -- the signal recorded but stays parked (its timeout, or a cancel, ends the wait)
  local waiters = {}
  for i = 1, #found, 2 do
    local r = rec_decode(redis.call('HGET', K_JOBS, found[i]))
    waiters[#waiters + 1] = {found[i], found[i + 1], r and not group_error(r.group) and r}
  end
  local woken = 0
  for _, w in ipairs(waiters) do
    local id, step, r = w[1], w[2], w[3]
    local stk = steps_key(id)
    redis.call('HDEL', wk, id)
    local reg = redis.pcall('HGET', stk, '~w')
    local raw = reg == name and redis.pcall('HGET', stk, step)
    local f = step_kind(raw) == 'wait' and step_fields(raw)
    if f and f.s == name then
      redis.pcall('HDEL', stk, '~w')
      redis.pcall('ZREM', K_PREFIX .. 'dwait', id)
      local deadline = tonumber(f.u) or 0
      if deadline > 0 and deadline <= now then
        -- too late: it timed out (its job records the same when it gets there)
        redis.call('HSET', stk, step, timeout_record(name, deadline, now))
      else
        redis.call('HSET', stk, step, signal_record(name, sid, payload, now))
        -- parked for this wait (its due time says so: a job back in K_DELAYED for a
        -- retry is due at another time), it is ready now, at the head of its group
        if r and r.state == ST_DELAYED and tonumber(redis.call('ZSCORE', K_DELAYED, id)) == f.d then
          redis.call('ZREM', K_DELAYED, id)
          make_ready(id, r, true)
          woken = woken + 1
        end
      end
    elseif reg == name then
      redis.pcall('HDEL', stk, '~w') -- its wait ended otherwise: a stale registration
    end
  end
  return woken, redis.call('EXISTS', wk) == 1
end
