-- Status codes returned per item by durq scripts.
-- Mirrored by durq.protocol.status.Status; tests/protocol/test_status.py keeps both equal.
local S_OK = 0
local S_CREATED = 1
local S_EXISTS = 2
local S_DEDUPLICATED = 3
local S_REPLACED = 4
local S_RETRYING = 5
local S_DEAD = 6
local S_LEASE_LOST = -1
local S_NOT_FOUND = -2
local S_CORRUPT = -3
local S_NOT_DEAD = -4
