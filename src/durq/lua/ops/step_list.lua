--[[ step_list: a page of what a job's runs stored: its steps, sleeps and waits
(lib/durable/record.lua), for its worker's replay and for `durq job show` and the
dashboard. Read only.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  id, ARGV[2] the HSCAN cursor ('0' to begin), ARGV[3] how many to read (a hint)
Returns  {now, next cursor ('0': done), name_1, record_1, ...}; the names beginning with
         '~' are durq's bookkeeping ('~w': the signal it waits for)
Errors   DURQ_WRONGTYPE when the job's steps key holds another Redis type
Cost     O(ARGV[3]) (a small hash: all of it at once).
]]
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/types"
--- @include "lib/durable/steps"

local sk = steps_key(ARGV[1])
local problem = type_error(sk, 'hash')
if problem then return wrongtype(problem) end
local page = redis.call('HSCAN', sk, ARGV[2], 'COUNT', tonumber(ARGV[3]))
local out = {now_ms(), page[1]}
for i = 1, #page[2] do out[#out + 1] = page[2][i] end
return out
