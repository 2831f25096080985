--[[ parked_counts: how many jobs of the queue are parked by a durable sleep or wait now
(docs/durable.md), for metrics. Read only.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV     none
Returns  {now, asleep, waiting}: jobs listed in <prefix>dsleep and <prefix>dwait with an
         end still to come (an entry whose job woke stays until the job ends, and no
         longer counts)
Errors   DURQ_WRONGTYPE when one of the two holds another Redis type
Cost     O(log n).
]]
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/types"

local problem = type_error(K_PREFIX .. 'dsleep', 'zset') or type_error(K_PREFIX .. 'dwait', 'zset')
if problem then return wrongtype(problem) end
local now = now_ms()
local after = '(' .. string.format('%d', now)
return {now, redis.call('ZCOUNT', K_PREFIX .. 'dsleep', after, '+inf'),
  redis.call('ZCOUNT', K_PREFIX .. 'dwait', after, '+inf')}
