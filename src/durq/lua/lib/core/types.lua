--- @include "lib/core/keys"
--- @include "lib/groups/keys"
--- @include "lib/core/type_check"

-- The type each of the queue's keys must have (lib/core/keys.lua), for keys_error.
local KEY_TYPES = {
  jobs = 'hash', rr = 'list', rrset = 'set', active = 'zset', delayed = 'zset',
  dead = 'zset', done = 'zset', reasons = 'hash', keys = 'hash', stats = 'hash',
  conf = 'hash', wake = 'zset', groups = 'zset', gactive = 'hash', glimit = 'hash',
  gweight = 'hash',
}

-- The problem with the first of the queue's keys `parts` (their names in lib/core/keys.lua
-- without the prefix: 'jobs', 'rr', ...) that holds another type; nil if none does.
-- `skip` (optional): a set of parts not to check, e.g. those a typed read made before
-- the script's first write already proved (lib/core/type_check.lua, read).
local function keys_error(parts, skip)
  for i = 1, #parts do
    local want = KEY_TYPES[parts[i]]
    -- The job-control keys (lib/control/job_control.lua) are hashes. They stay out of KEY_TYPES: a
    -- 17th entry doubles the size of a table Lua builds on every call (docs/decisions/).
    if want == nil and (parts[i] == 'ctl' or parts[i] == 'progress') then want = 'hash' end
    local err = not (skip and skip[parts[i]]) and type_error(K_PREFIX .. parts[i], want)
    if err then return err end
  end
  return nil
end

-- The same for the ready list and the priority zset of group g.
local function group_error(g)
  return type_error(ready_list(g), 'list') or type_error(ready_prio(g), 'zset')
end
