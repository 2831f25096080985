--[[ dead_letters: one page of dead letters, newest first. Read only.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  offset, ARGV[2] limit
Returns  {total, id_1, died_at_1, record_1 or false, reason_1 or false, ...}
Errors   DURQ_WRONGTYPE when a durq key holds another Redis type
Cost     O(log(dead) + limit).
]]
--- @include "lib/core/keys"
--- @include "lib/core/types"

local problem = keys_error({'dead', 'jobs', 'reasons'})
if problem then return wrongtype(problem) end

local offset = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local page = redis.call('ZREVRANGE', K_DEAD, offset, offset + limit - 1, 'WITHSCORES')
local out = {redis.call('ZCARD', K_DEAD)}
if #page == 0 then return out end
local ids = {}
for i = 1, #page, 2 do ids[#ids + 1] = page[i] end
local recs = redis.call('HMGET', K_JOBS, unpack(ids))
local reasons = redis.call('HMGET', K_REASONS, unpack(ids))
for i = 1, #ids do
  out[#out + 1] = ids[i]
  out[#out + 1] = page[2 * i]
  out[#out + 1] = recs[i]
  out[#out + 1] = reasons[i]
end
return out
