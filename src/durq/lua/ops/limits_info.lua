--[[ limits_info: the flow-control state of a queue (rate limits, max_active, pauses).
Read only.
KEYS     the queue key vector (lib/core/keys.lua)
ARGV[1]  limit: parked groups and per-group rates listed at most
Returns  {{field_1, value_1, ...}, {group_1, until_1, ready_1, ...}, {group_1, spec_1, ...}}:
         fields now (ms), rate, group_rate (specs, lib/limits/rate_limit.lua, '' for none),
         max_active, active, queue_until (ms the queue's own rate or pause lets the next
         job start, 0 when it may start now), started (jobs started in the last full
         second, counted while flow control is on), rate_limited (jobs given back by
         RateLimited, total), ready, waiting (ready jobs held back by a limit: all of
         them while the queue's own limit holds, else those of the parked groups listed),
         parked (groups parked), group_rates (groups with a rate of their own);
         then the parked groups that start again first, with their ready jobs; then up
         to `limit` per-group rates.
Errors   DURQ_WRONGTYPE when a durq key holds another Redis type
Cost     O(limit) commands.
]]
--- @include "lib/core/keys"
--- @include "lib/core/clock"
--- @include "lib/core/types"
--- @include "lib/groups/keys"
--- @include "lib/limits/conf"

local limit = tonumber(ARGV[1])
local problem = keys_error({'stats', 'active', 'groups'}) or flow_error(true)
if problem then return wrongtype(problem) end
local now = now_ms()
local f = get_flow()

local function ready_of(g)
  if g ~= '' then return tonumber(redis.call('ZSCORE', K_GROUPS, g)) or 0 end
  local l = redis.pcall('LLEN', ready_list(''))
  local p = redis.pcall('ZCARD', ready_prio(''))
  if type(l) ~= 'number' or type(p) ~= 'number' then return 0 end
  return l + p
end

local active = redis.call('ZCARD', K_ACTIVE)
local ready = math.max(tonumber(redis.call('HGET', K_STATS, 'ready')) or 0, 0)
local queue_until = 0
if f.tat then
  local room, base = gcra_room(f.tat, f.qrate, now, 1)
  if room == 0 then queue_until = gcra_next(base, f.qrate) end
end
local capped = f.max_active > 0 and active >= f.max_active

local parked = {}
local waiting = 0
local pk = K_PREFIX .. 'park'
local first = redis.call('ZRANGE', pk, 0, limit - 1, 'WITHSCORES')
for i = 1, #first, 2 do
  local n = ready_of(first[i])
  waiting = waiting + n
  parked[#parked + 1] = first[i]
  parked[#parked + 1] = first[i + 1]
  parked[#parked + 1] = n
end
if queue_until > 0 or capped then waiting = ready end

local own = redis.call('HSCAN', K_PREFIX .. 'grate', 0, 'COUNT', limit)[2]
local rates = {}
for i = 1, math.min(#own, 2 * limit) do rates[i] = own[i] end

local sec = math.floor(now / 1000)
local started = 0
if f.sec == sec then started = f.prev elseif f.sec == sec - 1 then started = f.cur end

return {
  {'now', now, 'rate', f.rate, 'group_rate', f.group_rate, 'max_active', f.max_active,
   'active', active, 'queue_until', queue_until, 'started', started,
   'rate_limited', tonumber(redis.call('HGET', K_STATS, 'rate_limited')) or 0,
   'ready', ready, 'waiting', math.min(waiting, ready), 'parked', redis.call('ZCARD', pk),
   'group_rates', redis.call('HLEN', K_PREFIX .. 'grate')},
  parked,
  rates,
}
