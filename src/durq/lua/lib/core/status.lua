-- Status codes returned per item by durq scripts.
-- Mirrored by durq.protocol.status.Status; tests/protocol/test_status.py keeps both equal.
local S_OK = 0
local S_CREATED = 1
local S_EXISTS = 2
local S_DEDUPLICATED = 3
local S_REPLACED = 4
local S_RETRYING = 5
local S_DEAD = 6
-- Job control (lib/control/job_control.lua). CANCELLED: cancel ended the job now; release, requeue
-- and defer ended it cancelled (a cancel was asked while it ran); extend and progress: a
-- cancel was asked. CANCELLING: cancel found the job running: its worker is told to stop
-- it. FINISHED: cancel found the job ended already; nothing changed. UPDATED: enqueue
-- (debounce, keep-last) gave these arguments to the job of the key that waits to start.
local S_CANCELLED = 7
local S_CANCELLING = 8
local S_FINISHED = 9
local S_UPDATED = 10
local S_LEASE_LOST = -1
local S_NOT_FOUND = -2
local S_CORRUPT = -3
local S_NOT_DEAD = -4
