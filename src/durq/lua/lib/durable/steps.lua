--- @include "lib/core/keys"

-- Durable steps (docs/durable.md): what a job's runs stored, beside its record, in the
-- queue's slot (every key derives from the prefix):
--   <prefix>steps:<id>  hash  step name -> its record, JSON whose first field names its
--                             kind (lib/durable/record.lua); '~w' -> the signal the job
--                             is registered as waiting for (one wait at a time)
--   <prefix>sig:<name>  hash  a kept signal: i (its id), a (sent at, ms), p (payload,
--                             JSON); it expires at a + its ttl
--   <prefix>sw:<name>   hash  job id -> wait step name: the jobs waiting for <name>
--   <prefix>dsleep      zset  job id -> the end of its sleep (asleep while in the future)
--   <prefix>dwait       zset  job id -> the end of its wait (DURABLE_FOREVER: none)
-- A job with stored steps carries FLAG_CONTROL, so every path that ends it reaches
-- durable_forget (lib/control/job_control.lua finish); those that delete a record the
-- flag marks delete its steps too (expire_done, purge, the dead-letter cap).

-- The due time of a wait without a timeout: never promoted (a signal or a cancel ends it)
local DURABLE_FOREVER = 9007199254740991

local function steps_key(id)
  return K_PREFIX .. 'steps:' .. id
end

-- Job `id` no longer waits for a signal: its registration goes. Bookkeeping (pcall):
-- a key of another type written by something else must not fail the caller's script.
local function wait_unregister(id)
  local sk = steps_key(id)
  local w = redis.pcall('HGET', sk, '~w')
  if type(w) == 'string' then
    redis.pcall('HDEL', K_PREFIX .. 'sw:' .. w, id)
    redis.pcall('HDEL', sk, '~w')
  end
  redis.pcall('ZREM', K_PREFIX .. 'dwait', id)
end

-- Job `id` ended (released, kept, dead, cancelled, expired): it sleeps and waits no
-- more; `drop`: its record goes now, and its stored steps with it. A job that stored
-- nothing pays one EXISTS.
local function durable_forget(id, drop)
  local sk = steps_key(id)
  if redis.pcall('EXISTS', sk) ~= 1 then return end
  wait_unregister(id)
  redis.pcall('ZREM', K_PREFIX .. 'dsleep', id)
  if drop then redis.call('DEL', sk) end
end
