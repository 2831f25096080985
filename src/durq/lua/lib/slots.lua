-- A named group's slots: its active jobs and its returning delayed jobs hold one each.
local function slot_add(g, n)
  if g == '' then return end
  local a = redis.call('HINCRBY', K_GACTIVE, g, n)
  if a <= 0 then redis.call('HDEL', K_GACTIVE, g) end
end
