-- The queue key vector: every durq script receives the same KEYS, in this order,
-- built by durq.keys.QueueKeys.vector. All share the queue's hash tag, so they live in
-- one Redis Cluster slot; the per-group and per-result keys are derived from the prefix
-- (KEYS[1]) and therefore share that slot too.
-- KEYS[1], the prefix, is never a key: while a Redis Cluster migrates the queue's slot,
-- a missing declared key makes the server redirect (ASK/TRYAGAIN) rather than run the
-- script on a half-moved queue whose group and result keys it does not declare.
--- @per-call (reset at the start of every call: lua/functions.py)
local K_PREFIX = KEYS[1]   -- durq:{name}:  (a prefix, never a key itself)
local K_JOBS = KEYS[2]     -- hash   id -> record (lib/core/record_layout.lua)
local K_RR = KEYS[3]       -- list   groups with ready jobs and free slots, served in turn
local K_RRSET = KEYS[4]    -- set    members of K_RR, so a group is never listed twice
local K_ACTIVE = KEYS[5]   -- zset   id -> lease deadline (ms, server time)
local K_DELAYED = KEYS[6]  -- zset   id -> due time (ms)
local K_DEAD = KEYS[7]     -- zset   id -> time of death (ms)
local K_DONE = KEYS[8]     -- zset   id -> end of retention (ms): kept records, tombstones
local K_REASONS = KEYS[9]  -- hash   id -> last failure / dead-letter / supersede reason (JSON)
local K_KEYS = KEYS[10]    -- hash   dedup key -> id of the not-yet-started job holding it
local K_STATS = KEYS[11]   -- hash   queue counters and the ready gauge
local K_CONF = KEYS[12]    -- hash   queue settings shared by every client; seq (priority FIFO)
local K_WAKE = KEYS[13]    -- zset   wake-up marker idle consumers block on (BZPOPMIN)
local K_GROUPS = KEYS[14]  -- zset   named group -> ready jobs (for "largest groups")
local K_GACTIVE = KEYS[15] -- hash   named group -> jobs holding a slot (active or returning)
local K_GLIMIT = KEYS[16]  -- hash   named group -> concurrency limit override
local K_GWEIGHT = KEYS[17] -- hash   named group -> jobs served per turn
--- @end

