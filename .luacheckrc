-- luacheck's settings for durq's scripts (src/durq/lua; `make check` runs luacheck).
--
-- The scripts run inside Redis (Lua 5.1) and share helpers by `--- @include` lines,
-- which the loader replaces with the included file's text (src/durq/lua/__init__.py).
-- Checked one file at a time, a file would use its includes' names as undefined
-- globals, so this file reads the includes and declares, for each file, the names they
-- give it: a lib's per-call state (its `--- @per-call` block) as globals a file may
-- assign, its functions and UPPER_CASE constants as read-only ones (the authoring rules:
-- docs/design.md, "Writing a script"). A name a file uses without including the lib
-- that declares it is an undefined global here, as it would be in a script whose
-- includes came in another order.
--
-- A lib declares what others use, so its top-level names are not "unused" when another
-- file names them; one that no other file names is reported as unused (dead code).

std = "lua51"
max_line_length = 100
-- what Redis gives every script: its API, the arguments, and the libraries it loads
read_globals = { "redis", "KEYS", "ARGV", "cjson", "cmsgpack", "bit", "struct" }

local lfs = require("lfs")

-- the directory of this file: the paths below are relative to it, wherever luacheck runs
local here = debug.getinfo(1, "S").source:match("^@(.*)[/\\][^/\\]*$") or "."
local ROOT = "src/durq/lua/"

local function read(rel)
  local f = assert(io.open(here .. "/" .. ROOT .. rel, "r"))
  local text = f:read("*a")
  f:close()
  return text
end

-- every Lua file under ROOT, relative to it (ops/x.lua, lib/<area>/y.lua)
local function lua_files()
  local out = {}
  local function walk(rel)
    for entry in lfs.dir(here .. "/" .. ROOT .. rel) do
      if entry ~= "." and entry ~= ".." then
        local path = rel == "" and entry or rel .. "/" .. entry
        local mode = lfs.attributes(here .. "/" .. ROOT .. path, "mode")
        if mode == "directory" then
          walk(path)
        elseif entry:match("%.lua$") then
          out[#out + 1] = path
        end
      end
    end
  end
  walk("")
  table.sort(out)
  return out
end

-- a file's top-level includes (column 0: an indented one is the body of a function of
-- the file, its names local to that function), by include name (lib/core/keys)
local function includes(text)
  local out = {}
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    local name = line:match('^%-%-%- @include "([%w_/]+)"%s*$')
    if name then out[#out + 1] = name end
  end
  return out
end

-- the locals a file declares at its top level: per-call ones (inside `--- @per-call` ...
-- `--- @end`) and the others
local function declared(text)
  local per_call, fixed = {}, {}
  local in_block = false
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    if line:match("^%-%-%- @per%-call") then
      in_block = true
    elseif line:match("^%-%-%- @end") then
      in_block = false
    else
      local names = line:match("^local function ([%a_][%w_]*)")
        or line:match("^local ([%a_][%w_]*[%s,%w_]*)")
      if names then
        for name in names:gmatch("[%a_][%w_]*") do
          local into = in_block and per_call or fixed
          into[#into + 1] = name
        end
      end
    end
  end
  return per_call, fixed
end

local files_list = lua_files()
local text_of, code_of = {}, {}
for _, rel in ipairs(files_list) do
  text_of[rel] = read(rel)
  -- the code without comments, to find which names a file uses
  code_of[rel] = text_of[rel]:gsub("%-%-%[%[.-%]%]", ""):gsub("%-%-[^\n]*", "")
end

local function file_of(include)
  return include:find("/") and include .. ".lua" or "ops/" .. include .. ".lua"
end

-- the names a file's includes give it, transitively (each lib once)
local function provided(rel)
  local globals, read_only, seen = {}, {}, {}
  local function visit(include)
    if seen[include] then return end
    seen[include] = true
    local text = text_of[file_of(include)]
    if not text then return end -- a missing include: the loader's tests report it
    for _, inner in ipairs(includes(text)) do visit(inner) end
    local per_call, fixed = declared(text)
    for _, name in ipairs(per_call) do globals[#globals + 1] = name end
    for _, name in ipairs(fixed) do read_only[#read_only + 1] = name end
  end
  for _, include in ipairs(includes(text_of[rel])) do visit(include) end
  return globals, read_only
end

-- true when a Lua file other than `rel` names `name` in its code
local function used_elsewhere(rel, name)
  local pattern = "%f[%w_]" .. name .. "%f[^%w_]"
  for other, code in pairs(code_of) do
    if other ~= rel and code:find(pattern) then return true end
  end
  return false
end

for _, rel in ipairs(files_list) do
  local globals, read_only = provided(rel)
  local ignore = {}
  if rel:match("^lib/") then
    local per_call, fixed = declared(text_of[rel])
    for _, list in ipairs({ per_call, fixed }) do
      for _, name in ipairs(list) do
        if used_elsewhere(rel, name) then
          -- unused here (211), set but read elsewhere (231, 311)
          ignore[#ignore + 1] = "[23]1./" .. name
        end
      end
    end
  end
  files[ROOT .. rel] = { globals = globals, read_globals = read_only, ignore = ignore }
end
