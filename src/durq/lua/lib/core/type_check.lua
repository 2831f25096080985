-- Something other than durq may write a value of another Redis type into a durq key.
-- Commands on such a key fail, and Redis does not undo a script's earlier writes when a
-- later command fails: ids popped before the failure would be lost, a job enqueued
-- before it would exist although its caller was told the call failed. So a script
-- checks the keys it may use before its first write, and fails with DURQ_WRONGTYPE
-- naming the key (CorruptQueue in Python): the call then changes nothing.
local function type_error(key, want)
  local t = redis.call('TYPE', key)['ok']
  if t ~= 'none' and t ~= want then
    return key .. ' holds a ' .. t .. ' where durq keeps a ' .. want
  end
  return nil
end

-- The error reply for a problem found above.
local function wrongtype(problem)
  return redis.error_reply('DURQ_WRONGTYPE ' .. problem)
end
