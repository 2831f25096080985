--- @include "lib/core/keys"

-- A job's result: a one-element list at <prefix>result:<id>, so waiters can block on it
-- with BLMOVE (the element moves onto the same list: it stays for every waiter).
local function store_result(id, value, ttl)
  local rk = K_PREFIX .. 'result:' .. id
  redis.call('DEL', rk)
  redis.call('RPUSH', rk, value)
  redis.call('PEXPIRE', rk, ttl)
end

-- The same for many jobs, `pairs` = {id, value, ...}: one DEL for all their keys (they
-- share the queue's slot), then the list and its TTL of each: 2n + 1 commands, not 3n.
local function store_results(pairs, ttl)
  if #pairs == 0 then return end
  local rks = {}
  for i = 2, #pairs, 2 do rks[i / 2] = K_PREFIX .. 'result:' .. pairs[i - 1] end
  redis.call('DEL', unpack(rks))
  for i = 2, #pairs, 2 do
    local rk = rks[i / 2]
    redis.call('RPUSH', rk, pairs[i])
    redis.call('PEXPIRE', rk, ttl)
  end
end
