--- @include "lib/keys"

-- A job's result: a one-element list at <prefix>result:<id>, so waiters can block on it
-- with BLMOVE (the element moves onto the same list: it stays for every waiter).
local function store_result(id, value, ttl)
  local rk = K_PREFIX .. 'result:' .. id
  redis.call('DEL', rk)
  redis.call('RPUSH', rk, value)
  redis.call('PEXPIRE', rk, ttl)
end
