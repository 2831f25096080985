--- @include "lib/core/keys"

-- Point the K_* keys at another queue of the same slot (publish.lua serves several
-- queues in one call). Must build the same names as durq.keys.QueueKeys.vector.
local function bind_prefix(p)
  K_PREFIX = p
  K_JOBS, K_RR, K_RRSET, K_ACTIVE = p .. 'jobs', p .. 'rr', p .. 'rrset', p .. 'active'
  K_DELAYED, K_DEAD, K_DONE, K_REASONS = p .. 'delayed', p .. 'dead', p .. 'done', p .. 'reasons'
  K_KEYS, K_STATS, K_CONF, K_WAKE = p .. 'keys', p .. 'stats', p .. 'conf', p .. 'wake'
  K_GROUPS, K_GACTIVE = p .. 'groups', p .. 'gactive'
  K_GLIMIT, K_GWEIGHT = p .. 'glimit', p .. 'gweight'
end
