-- How a started workflow step finds its workflow: <queue prefix>wfl, a hash
--   job id -> "<home prefix>\t<workflow id>\t<node>\t<failure policy>\t<run>"
-- written when the step is enqueued and removed when its completion (or death) leaves
-- for the workflow, so a step that runs twice reports once. The workflow itself lives in
-- its home queue's slot (lib/workflows/fan_in.lua); <run> names the submission it belongs to, so a
-- report meant for an earlier submission of the same workflow id changes nothing.
-- A step of a workflow durq 0.1.0 submitted (it has no run: lib/workflows/legacy.lua) has
-- 0.1.0's link, without the run, so that 0.1.0's workers still running read it too; it
-- is read here with the run ''.
local WF_LINKS = 'wfl'

local function wf_link(home, wid, node, policy, run)
  if run == '' then return home .. '\t' .. wid .. '\t' .. node .. '\t' .. policy end
  return home .. '\t' .. wid .. '\t' .. node .. '\t' .. policy .. '\t' .. run
end

-- home, wid, node, policy, run (nils for a link that is not one; run '' for 0.1.0's)
local function wf_parse_link(link)
  local home, wid, node, policy, run =
    string.match(link, '^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)$')
  if home then return home, wid, node, policy, run end
  home, wid, node, policy = string.match(link, '^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)$')
  if home then return home, wid, node, policy, '' end
  return nil
end

-- Split s at every occurrence of the plain string sep.
local function wf_split(s, sep)
  local out, pos = {}, 1
  while true do
    local i = string.find(s, sep, pos, true)
    if not i then
      out[#out + 1] = string.sub(s, pos)
      return out
    end
    out[#out + 1] = string.sub(s, pos, i - 1)
    pos = i + #sep
  end
end
