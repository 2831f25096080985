--[[ caps_seen: a worker of the queue says again which capabilities it has, while its
looks find no held job (worker/upkeep.py): the timestamps caps.lua writes
(lib/holding/seen.lua), without what only held jobs need (which capabilities have some,
the sweep), for a few commands where caps.lua takes about twenty. A job held meanwhile is
found by the worker's next look, which then calls caps.lua.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  grace_ms: unknown_task_grace (> 0)
ARGV[2]  ahead_ms: the worker says them again within this (lib/holding/seen.lua)
ARGV[3..] the worker's capabilities (at least one)
Returns  1
Errors   DURQ_WRONGTYPE when the caps hash holds another Redis type, before any change
Cost     5 commands (TIME, TYPE, HMGET, HSET, PEXPIRE), whatever the queue holds
]]
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/type_check"
--- @include "lib/holding/seen"

local caps = {}
for i = 3, #ARGV do caps[#caps + 1] = ARGV[i] end
local problem = type_error(K_PREFIX .. HELD_CAPS, 'hash')
if problem then return wrongtype(problem) end
if #caps > 0 then held_seen(caps, now_ms(), tonumber(ARGV[1]), tonumber(ARGV[2])) end
return 1
