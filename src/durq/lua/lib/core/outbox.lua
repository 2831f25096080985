--- @include "lib/core/record_layout"

-- The workflow outbox of a queue: a durq queue of its own under <queue prefix>wfo:, in the
-- queue's slot, whose jobs are forwarding orders for another slot (a child's completion
-- for its parent's slot, a start of a step in another queue). Workers of the queue take
-- them like jobs (leased, retried) and run workflow_deliver.lua in the target slot: an
-- idempotent apply delivered at least once (durq.worker.outbox). Its keys are named here
-- (not through the K_* vector), so a script can push while K_* point elsewhere.
local OUTBOX_PART = 'wfo:'
local OUTBOX_ATTEMPTS = 10000 -- an entry that cannot be delivered yet is retried, not dropped

local function outbox_push(qprefix, id, payload, now)
  local p = qprefix .. OUTBOX_PART
  local jobs = p .. 'jobs'
  -- ids are unique by construction (workflow, step, delivery); a suffix keeps them so
  while redis.call('HEXISTS', jobs, id) == 1 do id = id .. '+' end
  redis.call('RPUSH', p .. 'pending', id)
  redis.call('HSET', jobs, id, rec_new(ST_PENDING, 0, 0, OUTBOX_ATTEMPTS, now, '', '', payload))
  if redis.call('SISMEMBER', p .. 'rrset', '') == 0 then
    redis.call('RPUSH', p .. 'rr', '')
    redis.call('SADD', p .. 'rrset', '')
  end
  redis.pcall('HINCRBY', p .. 'stats', 'ready', 1)
  redis.pcall('HINCRBY', p .. 'stats', 'enqueued', 1)
  redis.pcall('ZADD', p .. 'wake', 0, '0')
end
