--- @include "lib/core/keys"

local function set_reason(id, fields)
  redis.call('HSET', K_REASONS, id, cjson.encode(fields))
end
