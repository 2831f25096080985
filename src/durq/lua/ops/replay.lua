--[[ replay: dead letters go back to their group's tail with their attempts reset.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  mode: 'ids' (the ids given) or 'oldest' (the oldest `limit` dead letters)
ARGV[2]  limit (mode 'oldest')
ARGV[3..] ids (mode 'ids')
Returns  {id_1, status_1, ...}: OK, NOT_DEAD (not a dead letter), CORRUPT (the record
         is unreadable, or its group's keys hold another type: it stays a dead letter).
Errors   DURQ_WRONGTYPE when a durq key holds another Redis type, before any change.
Cost     O(ids or limit) commands; "replay all" is a loop of bounded calls.
]]
--- @include "lib/core/status"
--- @include "lib/core/keys"
--- @include "lib/core/dead_ids"
--- @include "lib/core/record"
--- @include "lib/core/make_ready"
--- @include "lib/core/types"

local problem = keys_error({'dead', 'jobs', 'reasons', 'conf', 'glimit', 'gactive', 'rr',
  'rrset'})
if problem then return wrongtype(problem) end

local ids = asked_dead_ids()
local out = {}
local replayed = 0
for i = 1, #ids do
  local id = ids[i]
  local status = S_OK
  if not redis.call('ZSCORE', K_DEAD, id) then
    status = S_NOT_DEAD
  else
    local r = rec_decode(redis.call('HGET', K_JOBS, id))
    if not r or r.state ~= ST_DEAD or group_error(r.group) then
      status = S_CORRUPT
    else
      r.attempts = 0
      make_ready(id, r, false)
      redis.call('ZREM', K_DEAD, id)
      redis.call('HDEL', K_REASONS, id)
      replayed = replayed + 1
    end
  end
  out[#out + 1] = id
  out[#out + 1] = status
end
count('replayed', replayed)
offer_touched()
flush_counters()
wake_if_needed()
return out
