--- @include "lib/group_keys"

-- Something other than durq may write a value of another Redis type into a durq key.
-- Commands on such a key fail, and Redis does not undo a script's earlier writes when a
-- later command fails: ids popped before the failure would be lost, a job enqueued
-- before it would exist although its caller was told the call failed. So a script
-- checks the keys it may use before its first write, and fails with DURQ_WRONGTYPE
-- naming the key (CorruptQueue in Python): the call then changes nothing.
local KEY_TYPES = {
  jobs = 'hash', rr = 'list', rrset = 'set', active = 'zset', delayed = 'zset',
  dead = 'zset', done = 'zset', reasons = 'hash', keys = 'hash', stats = 'hash',
  conf = 'hash', wake = 'zset', groups = 'zset', gactive = 'hash', glimit = 'hash',
  gweight = 'hash',
}

local function type_error(key, want)
  local t = redis.call('TYPE', key)['ok']
  if t ~= 'none' and t ~= want then
    return key .. ' holds a ' .. t .. ' where durq keeps a ' .. want
  end
  return nil
end

-- The problem with the first of the queue's keys `parts` (their names in lib/keys.lua
-- without the prefix: 'jobs', 'rr', ...) that holds another type; nil if none does.
local function keys_error(parts)
  for i = 1, #parts do
    local err = type_error(K_PREFIX .. parts[i], KEY_TYPES[parts[i]])
    if err then return err end
  end
  return nil
end

-- The same for the ready list and the priority zset of group g.
local function group_error(g)
  return type_error(ready_list(g), 'list') or type_error(ready_prio(g), 'zset')
end

-- The error reply for a problem found above.
local function wrongtype(problem)
  return redis.error_reply('DURQ_WRONGTYPE ' .. problem)
end
