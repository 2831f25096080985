--- @include "lib/core/keys"
--- @include "lib/core/type_check"

-- A job's last failures, for operators (`durq job show`, the dashboard's job page): the
-- reasons hash keeps only the latest, a dead letter only the last. One hash per job that
-- failed, <prefix>errors:<id>, a ring of ATTEMPT_ERRORS_KEPT entries (field: the job's
-- failure count modulo the size, which never repeats within the last few failures, a
-- replay included), expiring on its own: no path that ends or removes a job has to know
-- of it, and the cost stays on the failure path. A hash, not a capped list: its commands
-- (HSET, HGETALL) are already in the documented ACL rules (docs/deployment.md).
local ATTEMPT_ERRORS_KEPT = 5

local function attempt_errors_key(id)
  return K_PREFIX .. 'errors:' .. id
end

-- The problem with job id's error ring if it holds another type (before any write).
local function attempt_errors_type_error(id)
  return type_error(attempt_errors_key(id), 'hash')
end

-- Record failure number `failure` of job id, at attempt `attempt`, in its ring, kept for
-- ttl_ms from now. `entry` is the caller's JSON object of the failure, already short
-- (protocol/args.py, attempt_error_json): the counts and the server's time go in front
-- of its fields, so no JSON is decoded here.
local function record_attempt_error(id, failure, attempt, now, entry, ttl_ms)
  local key = attempt_errors_key(id)
  local rest = string.sub(entry, 2) -- after its '{'
  if rest ~= '}' then rest = ',' .. rest end
  redis.call('HSET', key, failure % ATTEMPT_ERRORS_KEPT,
    '{"failure":' .. failure .. ',"attempt":' .. attempt .. ',"at":' .. now .. rest)
  redis.call('PEXPIRE', key, math.max(ttl_ms, 1))
end
