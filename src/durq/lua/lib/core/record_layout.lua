-- A job record, the value of K_JOBS[id]: a fixed binary header, then the group, the
-- dedup key and the payload. Layout (big-endian), mirrored by durq.protocol.record:
--   B version  B state  b priority  B codec  H attempts  H max_attempts  I4 deliveries
--   H failures  I6 enqueued_at  I6 dequeued_at  I6 requeued_at  B flags      (33 bytes)
--   B len(group) group  B len(key) key  payload
-- attempts counts the attempts that count toward max_attempts (a defer gives one back);
-- deliveries counts every hand-out. The lease token is "<deliveries>.<dequeued_at>":
-- it changes on every delivery, so a worker whose lease was taken over cannot use it.
local REC_FMT = '>BBbBHHIHI6I6I6B'
local REC_FIXED = 33
local REC_VERSION = 1

local ST_PENDING = 1
local ST_DELAYED = 2
local ST_ACTIVE = 3
local ST_DEAD = 4
local ST_COMPLETED = 5
local ST_SUPERSEDED = 6
local ST_CANCELLED = 7 -- job control (lib/control/job_control.lua): cancelled, never to run (again)
local ST_EXPIRED = 8   -- job control: not started by its expiry time, never to run
local ST_HELD = 9      -- waits for a worker that runs its task (lib/holding/held.lua)
-- ST_HELD is never stored: a held record has the state byte ST_DELAYED and FLAG_HELD
-- (rec_decode and rec_encode, lib/core/record.lua, turn one into the other), so durq
-- 0.1.0, which knows no state 9, reads a held job as a delayed one: its cancels, keys,
-- schedules and job pages work on it (docs/decisions/held-records.md).

-- The job was started before and is waiting to come back (retry, defer): it returns to
-- the head of its group.
local FLAG_RETURNING = 1
-- The job holds one of its named group's slots (counted in K_GACTIVE). Slots are counted
-- only while the queue has group limits; the flag keeps the count exact when limits are
-- set or removed while jobs run.
local FLAG_SLOT = 2
-- Job control (lib/control/job_control.lua). CANCEL: a cancel was asked while the job was active;
-- every way out of active (release, requeue, defer, rate_limited, lease expiry) then ends
-- it cancelled.
-- CONTROL: the job has job-control data (expiry, dedup mode, follow-up, progress) that
-- the paths starting and ending it look up; a plain job never pays for that lookup.
-- Both are above the other flags, so the hot paths test `flags >= FLAG_CANCEL` (a
-- comparison, not a call of bit.band) before looking at either.
local FLAG_CANCEL = 4
local FLAG_CONTROL = 8
-- The record of a held job (ST_HELD, above); cleared when it leaves the holding area.
local FLAG_HELD = 16

local function rec_new(state, prio, codec, maxatt, now, group, key, payload)
  local head = struct.pack(REC_FMT, REC_VERSION, state, prio, codec, 0, maxatt, 0, 0, now,
    0, 0, 0)
  return head .. string.char(#group) .. group .. string.char(#key) .. key .. payload
end
