--- @include "lib/core/keys"
--- @include "lib/core/dead_letter"
--- @include "lib/core/make_ready"
--- @include "lib/core/delayed"
--- @include "lib/control/job_control"
--- @include "lib/limits/active_cap"

-- Jobs held under a lease go back to their queue: retried (requeue.lua), deferred
-- (defer.lua) or held back by a rate limit (rate_limited.lua). What those calls share.

-- A running job whose cancel was asked (FLAG_CANCEL: cancel.lua, a cancelled workflow)
-- never goes back, whatever would give it back (a retry, a defer, RateLimited): it ends
-- cancelled (lib/control/job_control.lua), as its result's waiter was told. Returns true
-- then. Every caller of send_back asks this first; make_ready clears the flag, so a job
-- given back would run again and could complete.
local function ends_cancelled(id, r, now)
  if bit.band(r.flags, FLAG_CANCEL) == 0 then return false end
  control().end_cancelled(id, r, now)
  return true
end

-- An active job goes back (retry or defer): after `delay` ms, or now, to the head of its
-- group. While it waits it keeps its group slot (if it holds one), so a strictly ordered
-- group (limit 1) does not start the next job before this one is done.
local function send_back(id, r, delay, now)
  if delay > 0 then
    schedule(id, now + delay)
    redis.call('ZREM', K_ACTIVE, id)
    r.state = ST_DELAYED
    r.flags = bit.bor(r.flags, FLAG_RETURNING)
    redis.call('HSET', K_JOBS, id, rec_encode(r))
  else
    drop_slot(r)
    make_ready(id, r, true)
    redis.call('ZREM', K_ACTIVE, id)
  end
end

-- A job goes back without counting an attempt (defer, rate_limited): the attempt its
-- delivery used is given back, so such returns never dead-letter it.
local function give_back(id, r, delay, now)
  if r.attempts > 0 then r.attempts = r.attempts - 1 end
  send_back(id, r, delay, now)
end

-- The end of a call that took n jobs off their leases: a place freed under a max_active
-- wakes an idle consumer (lib/limits/active_cap.lua), the groups made ready are offered,
-- the counters written, and a consumer woken if there is work for one.
local function sent_back(n)
  if n > 0 then cap_freed() end
  offer_touched()
  flush_counters()
  wake_if_needed()
end
