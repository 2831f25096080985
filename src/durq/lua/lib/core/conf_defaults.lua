-- The defaults of the queue settings (K_CONF), used while a setting is not stored.
-- durq.protocol.admin.CONF_DEFAULTS holds the same; tests/lua/test_agreement.py keeps both
-- equal. Plain numbers, not a table: they cost a script nothing at run time.
--   group_limit   default concurrency per named group; 0 means unlimited
--   dedup_window  ms after enqueue during which a finished job's id stays taken
--   dead_cap      max dead letters kept; 0 means unlimited; evictions are counted
local DEFAULT_GROUP_LIMIT = 0
local DEFAULT_DEDUP_WINDOW = 60000
local DEFAULT_DEAD_CAP = 0
