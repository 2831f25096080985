--- @include "lib/core/keys"
--- @include "lib/core/record"
--- @include "lib/core/counters"
--- @include "lib/core/conf"
--- @include "lib/groups/slots"
--- @include "lib/workflows/fan_in_dead"
--- @include "lib/durable/steps"

-- Job control: cancel, expiry, the dedup modes throttle, debounce and keep-last, and
-- progress. A job that uses any of them carries FLAG_CONTROL (lib/core/record_layout.lua),
-- and its data lives beside the record, in keys derived from the prefix (so in the
-- queue's slot):
--   <prefix>ctl        hash    id -> JSON {e: expires at (ms), m: dedup mode ('thr',
--                              'deb', 'keep'), t: result ttl (ms), n: keep-last
--                              follow-up id, a: id of the job the follow-up waits for}
--   <prefix>progress   hash    id -> progress JSON (progress.lua)
--   <prefix>thr:<key>  string  the job that opened the key's throttle window (PX ttl)
--   <prefix>cancel     pub/sub channel: ids of running jobs whose cancel was asked
-- Only the paths that start or end a flagged job look there: a plain job pays one flag
-- test. Lua re-creates every function of a script on each call, and capturing an
-- upvalue costs more the more upvalues the script has open (docs/decisions/script-costs.md).
-- Release and dequeue include this file: so its functions are made on first use,
-- by control(), which captures few, and a call with no flagged job pays for that one.

-- The due time of a keep-last follow-up while the job it waits for has not ended: it is
-- never promoted; the end of that job makes it due (finish below).
local PARKED = 9007199254740991

--- @per-call (reset at the start of every call: lua/functions.py)
local control_fns = nil
--- @end

-- The job-control functions: get, finish, outcome, end_unstarted, end_cancelled,
-- expired (each described where it is made).
local function control()
  if control_fns then return control_fns end
  -- The keys, named from the prefix here rather than captured: each upvalue a function
  -- captures costs its creation, on every call of the script (see above). They shadow
  -- the script's own K_* (lib/core/keys.lua) on purpose, with the same values.
  -- luacheck: push ignore 431
  local K_JOBS, K_ACTIVE, K_DELAYED, K_DONE = K_PREFIX .. 'jobs', K_PREFIX .. 'active',
    K_PREFIX .. 'delayed', K_PREFIX .. 'done'
  local K_REASONS, K_KEYS = K_PREFIX .. 'reasons', K_PREFIX .. 'keys'
  -- luacheck: pop
  local c = {}

  -- The job-control data of job `id` (a table), or nil.
  function c.get(id)
    local raw = redis.call('HGET', K_PREFIX .. 'ctl', id)
    if not raw then return nil end
    local ok, data = pcall(cjson.decode, raw)
    if ok and type(data) == 'table' then return data end
    return nil
  end

  local function put(id, data)
    redis.call('HSET', K_PREFIX .. 'ctl', id, cjson.encode(data))
  end

  local function put_reason(id, fields)
    redis.call('HSET', K_REASONS, id, cjson.encode(fields))
  end

  -- Job `id` (record r, not yet written back) has reached a terminal state, or stopped
  -- waiting for good: `why` is 'released' (its record is deleted), 'kept' (released,
  -- record kept), 'dead', 'cancelled' or 'expired'. Its dedup key is freed only while it
  -- still points to it; a keep-last follow-up waiting for it becomes due and keeps the
  -- key; a throttle window is closed early only by cancel or expiry. Its control data
  -- goes, but a dead letter keeps it (a replay starts it again: its expiry still applies).
  function c.finish(id, r, now, why)
    local data = nil
    if bit.band(r.flags, FLAG_CONTROL) ~= 0 then data = c.get(id) end
    local mode = data and data.m
    if r.key ~= '' then
      local handed = false
      if mode == 'keep' and data.n then
        -- the follow-up holds the key already (enqueue_control.lua): it becomes due now
        if tonumber(redis.call('ZSCORE', K_DELAYED, data.n)) == PARKED then
          redis.call('ZADD', K_DELAYED, now, data.n)
          need_wake = true -- lib/groups/offer: an idle consumer re-plans and promotes it
          local follow = c.get(data.n)
          if follow then
            follow.a = nil
            put(data.n, follow)
          end
          handed = true
        end
      elseif mode == 'keep' and data.a then
        -- a follow-up that ends before it started: the running job it waited for holds
        -- the key again, so the next enqueue waits for that job too
        local pr = rec_decode(redis.call('HGET', K_JOBS, data.a))
        if pr and pr.deliveries > 0 and (pr.state == ST_ACTIVE or pr.state == ST_PENDING
            or pr.state == ST_DELAYED or pr.state == ST_HELD) then
          if redis.call('HGET', K_KEYS, r.key) == id then
            redis.call('HSET', K_KEYS, r.key, data.a)
          end
          local pc = c.get(data.a)
          if pc and pc.n == id then
            pc.n = nil
            put(data.a, pc)
          end
          handed = true
        end
      end
      if not handed and redis.call('HGET', K_KEYS, r.key) == id then
        redis.call('HDEL', K_KEYS, r.key)
      end
      if mode == 'thr' and (why == 'cancelled' or why == 'expired') then
        local tk = K_PREFIX .. 'thr:' .. r.key
        if redis.pcall('GET', tk) == id then redis.call('DEL', tk) end
      end
    end
    if data and why ~= 'dead' then redis.call('HDEL', K_PREFIX .. 'ctl', id) end
    if why == 'released' and bit.band(r.flags, FLAG_CONTROL) ~= 0 then
      redis.call('HDEL', K_PREFIX .. 'progress', id)
    end
    -- durable steps: it sleeps and waits no more; released, its steps go with its record
    if bit.band(r.flags, FLAG_CONTROL) ~= 0 then durable_forget(id, why == 'released') end
  end

  -- The outcome a waiter of the job's result gets (durq.payloads: {"ok": false, ...}),
  -- stored as lib/core/result.lua does.
  function c.outcome(id, why, now, ttl)
    if ttl and ttl > 0 then
      local rk = K_PREFIX .. 'result:' .. id
      redis.call('DEL', rk)
      redis.call('RPUSH', rk, cjson.encode({ok = false, error = {reason = why, at = now}}))
      redis.call('PEXPIRE', rk, ttl)
    end
  end

  -- A job that never starts (again) ends: cancelled (pending, delayed or backing off) or
  -- expired (found at its start). The caller has taken it out of the ready or delayed
  -- structures, except a default-priority pending job, which stays listed (`listed`):
  -- dequeue discards it when it reaches it, as it does superseded ones. The record stays,
  -- without its payload, for the dedup window; the waiter of its result is told.
  function c.end_unstarted(id, r, now, state, ttl, listed, fields)
    drop_slot(r) -- a job backing off may hold its group's slot
    local why = state == ST_CANCELLED and 'cancelled' or 'expired'
    c.finish(id, r, now, why)
    r.state = state
    r.flags = bit.band(r.flags, FLAG_CONTROL)
    r.tail = string.char(#r.group) .. r.group .. string.char(#r.key) .. r.key
    redis.call('HSET', K_JOBS, id, rec_encode(r))
    if not listed then redis.call('ZADD', K_DONE, now + get_conf().dedup_window, id) end
    fields.reason = why
    fields.at = now
    put_reason(id, fields)
    c.outcome(id, why, now, ttl)
    count(why, 1)
    fan_in_dead(id, r, now) -- a workflow step: its workflow applies its failure policy
  end

  -- An active job whose cancel was asked (FLAG_CANCEL) leaves active: whatever its
  -- holder reports (done, failed, given back) or its lease running out, it ends
  -- cancelled. The waiter of its result was told when the cancel was asked (cancel.lua).
  function c.end_cancelled(id, r, now)
    redis.call('ZADD', K_DONE, now + get_conf().dedup_window, id)
    redis.call('ZREM', K_ACTIVE, id)
    drop_slot(r)
    c.finish(id, r, now, 'cancelled')
    r.state = ST_CANCELLED
    r.flags = bit.band(r.flags, FLAG_CONTROL)
    r.tail = string.char(#r.group) .. r.group .. string.char(#r.key) .. r.key
    redis.call('HSET', K_JOBS, id, rec_encode(r))
    put_reason(id, {reason = 'cancelled', at = now, attempt = r.attempts,
      message = 'cancelled while it ran'})
    count('cancelled', 1)
    fan_in_dead(id, r, now) -- a workflow step: its workflow applies its failure policy
  end

  -- A flagged job about to start (control data `data`): when its expiry time has passed
  -- it ends expired instead, never delivered. Returns true then.
  function c.expired(id, r, now, data)
    if not (data and data.e and data.e <= now) then return false end
    c.end_unstarted(id, r, now, ST_EXPIRED, data.t, false, {expires_at = data.e,
      attempt = r.attempts, message = 'not started by its expiry time'})
    return true
  end

  control_fns = c
  return c
end
