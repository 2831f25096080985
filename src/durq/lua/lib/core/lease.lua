--- @include "lib/core/keys"
--- @include "lib/core/status"
--- @include "lib/core/record"

-- Lease checks: a worker's call on a job (release, extend, requeue, defer) is fenced by
-- the lease token it was handed (rec_token in lib/core/record.lua).

-- Check that a caller still holds the lease `token` on job `id`. Returns the record, or
-- nil and a status.
local function held(id, token)
  local raw = redis.call('HGET', K_JOBS, id)
  if not raw then
    -- a tombstone means it finished: the caller's lease is gone, the job is not unknown
    if redis.call('ZSCORE', K_DONE, id) then return nil, S_LEASE_LOST end
    return nil, S_NOT_FOUND
  end
  local r = rec_decode(raw)
  if not r then return nil, S_CORRUPT end
  if r.state ~= ST_ACTIVE or rec_token(r) ~= token then return nil, S_LEASE_LOST end
  return r, S_OK
end
