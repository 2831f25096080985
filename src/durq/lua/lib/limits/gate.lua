--- @include "lib/core/keys"
--- @include "lib/groups/offer"
--- @include "lib/core/type_check"

-- Flow control in dequeue (rate limits, max_active, pauses: docs/flow-control.md). Its
-- functions (lib/limits/gate_hooks.lua) are made only for a queue whose flow hash exists: a
-- closure that captures variables costs a script call a fraction of a µs for each (Lua
-- walks the list of open upvalues, long in a script of many locals), and dequeue runs
-- for every job. A queue without flow control pays one EXISTS.
--- @per-call (reset at the start of every call: lua/functions.py)
local flow_ctl = nil -- the hooks, or nil: no flow control
--- @end

local function flow_machinery()
  --- @include "lib/limits/gate_hooks"
end

-- Before any change: make the hooks when the queue uses flow control, and return the
-- problem of a flow key of another type (lib/core/type_check.lua), or nil.
local function flow_prepare()
  if redis.call('EXISTS', K_PREFIX .. 'flow') == 0 then return nil end
  flow_ctl = flow_machinery()
  return flow_ctl.problem()
end
