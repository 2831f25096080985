--- @include "lib/core/type_check"

-- A read that checks its key's type for free: Redis refuses a typed command (HMGET,
-- ZRANGE, LLEN...) on a key of another type, so a read made with pcall before the
-- script's first write proves the key's type, and TYPE runs only to name the key when
-- the read fails. Returns an error reply to return, or nil and the reply.
local function read(key, want, ...)
  local reply = redis.pcall(...)
  if type(reply) == 'table' and reply.err then
    local problem = type_error(key, want)
    if problem then return wrongtype(problem) end
    return redis.error_reply(reply.err) -- not about the key's type (e.g. an ACL refusal)
  end
  return nil, reply
end

-- The same for the typed read that f(...) makes first (e.g. get_conf, lib/core/conf.lua):
-- returns an error reply to return, or nil and what f returned (up to two values).
local function read_by(key, want, f, ...)
  local ok, value, more = pcall(f, ...)
  if ok then return nil, value, more end
  local problem = type_error(key, want)
  if problem then return wrongtype(problem) end
  error(value, 0) -- not about the key's type: fail as f did
end
