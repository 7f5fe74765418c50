--- Argument checks for the pure-Lua layers, with the same messages as the C
-- binding: `"<func>: <field>: expected <what>, got <value>"`.
-- @module qoslab.check
local M = {}

--- A value as an error message shows it: `string "x"`, a number as written
-- (a float with an integral value as an integer: 1e9 is 1000000000, not
-- 1000000000.0), `nan`, a boolean, else its type.
-- @param v any value
-- @treturn string
local function describe(v)
  if type(v) == 'string' then return string.format('string %q', v) end
  if type(v) == 'number' and v ~= v then return 'nan' end
  if type(v) == 'number' then return tostring(math.tointeger(v) or v) end
  if type(v) == 'boolean' then return tostring(v) end
  return type(v)
end
M.describe = describe

--- Raise `"<ctx>: <field>: expected <expected>, got <v>"` at the caller's caller.
function M.fail(ctx, field, expected, v, level)
  error(string.format('%s: %s: expected %s, got %s', ctx, field, expected,
    describe(v)), (level or 1) + 2)
end

--- Run a check-only binding call (`core.netem_check`, `core.shape_check`,
-- ...) and return its results; its error is raised again `level` levels up
-- (1 = the function calling `call`, 2 = that function's caller), so the
-- message the binding wrote once points at the caller's line.
-- @tparam integer level
-- @tparam function fn a binding function that raises on bad input
-- @param ... its arguments
-- @return what fn returns
-- @raise fn's message, positioned at `level`
-- @usage local canon = check.call(2, core.netem_check, ctx, 'spec', nil, spec)
function M.call(level, fn, ...)
  local r = table.pack(pcall(fn, ...))
  if not r[1] then error(r[2], level + 1) end
  return table.unpack(r, 2, r.n)
end

--- Whether err is the stand-alone interpreter's own "interrupted!" (lua.c
-- raises it from a hook on SIGINT when qoslab's signal handlers are not
-- installed), positioned wherever the hook happened to run: inside one of
-- qoslab's files or nowhere. A caller that catches it raises
-- `error("interrupted!", level)` again, at its own caller's line.
-- @param err any error value
-- @treturn boolean
function M.interpreter_interrupt(err)
  if type(err) ~= 'string' then return false end
  return err == 'interrupted!' or err:find('^[^\n:]-qoslab/[%w_/]+%.lua:%d+: interrupted!$') ~= nil
end

--- Raise for any key of t that is not in the set `allowed` ({key=true,...}).
-- Unlike `fail` and the other checks, level counts from keys' caller (1 =
-- the function calling keys, 2 = its caller): the same line needs one more.
function M.keys(ctx, prefix, t, allowed, level)
  for k in pairs(t) do
    if type(k) ~= 'string' or not allowed[k] then
      local known = {}
      for a in pairs(allowed) do known[#known + 1] = a end
      table.sort(known)
      error(string.format('%s: %s.%s: unknown key (known keys: %s)', ctx,
        prefix, (tostring(k):gsub('%z', '\\0')), table.concat(known, ', ')), (level or 1) + 1)
    end
  end
end

--- Check t is a table.
function M.table(ctx, field, t, level)
  if type(t) ~= 'table' then M.fail(ctx, field, 'a table', t, (level or 1) + 1) end
  return t
end

--- Optional number in [min, max] (finite). Returns v or default.
function M.number(ctx, field, v, min, max, default, level)
  if v == nil then return default end
  if type(v) ~= 'number' or v ~= v or v == math.huge or v == -math.huge
      or (min and v < min) or (max and v > max) then
    M.fail(ctx, field, string.format('a finite number in [%s, %s]',
      tostring(min or '-inf'), tostring(max or 'inf')), v, (level or 1) + 1)
  end
  return v
end

--- Optional finite number > 0 (a divisor: a scale). Returns v or default.
function M.positive(ctx, field, v, default, level)
  if v == nil then return default end
  if type(v) ~= 'number' or v ~= v or v == math.huge or v <= 0 then
    M.fail(ctx, field, 'a finite number > 0', v, (level or 1) + 1)
  end
  return v
end

--- Optional integer in [min, max]. Returns v or default.
function M.integer(ctx, field, v, min, max, default, level)
  if v == nil then return default end
  if math.type(v) ~= 'integer' and not (type(v) == 'number' and v == math.floor(v)
      and v == v and v ~= math.huge and v ~= -math.huge) then
    M.fail(ctx, field, string.format('an integer in [%s, %s]',
      tostring(min or '-inf'), tostring(max or 'inf')), v, (level or 1) + 1)
  end
  if (min and v < min) or (max and v > max) then
    M.fail(ctx, field, string.format('an integer in [%s, %s]',
      tostring(min or '-inf'), tostring(max or 'inf')), v, (level or 1) + 1)
  end
  return math.tointeger(v)
end

--- Optional string. Returns v or default.
function M.string(ctx, field, v, default, level)
  if v == nil then return default end
  if type(v) ~= 'string' then M.fail(ctx, field, 'a string', v, (level or 1) + 1) end
  return v
end

--- Optional string that reaches C (a name, an address, a file path): C
-- reads it up to its first NUL byte, so one inside is refused rather than
-- silently cutting the value short ("lo\0x" would name lo).
-- Returns v or default.
function M.cstring(ctx, field, v, default, level)
  if v == nil then return default end
  if type(v) ~= 'string' then M.fail(ctx, field, 'a string', v, (level or 1) + 1) end
  if v:find('\0', 1, true) then
    M.fail(ctx, field, 'a string without NUL bytes', v, (level or 1) + 1)
  end
  return v
end

--- Optional network namespace name, as the C binding checks it: 1..200
-- bytes, no "/" or NUL, not "." or ".." (so `netns = ''` is an error, not
-- "no namespace"). Returns v or default.
function M.netns(ctx, field, v, default, level)
  if v == nil then return default end
  M.cstring(ctx, field, v, nil, (level or 1) + 1)
  if v == '' or #v > 200 or v:find('/', 1, true) or v == '.' or v == '..' then
    M.fail(ctx, field, "a namespace name (1..200 bytes, no '/', not . or ..)", v, (level or 1) + 1)
  end
  return v
end

--- Optional boolean. Returns v or default.
function M.boolean(ctx, field, v, default, level)
  if v == nil then return default end
  if type(v) ~= 'boolean' then M.fail(ctx, field, 'a boolean', v, (level or 1) + 1) end
  return v
end

--- Optional function. Returns v or default.
function M.func(ctx, field, v, default, level)
  if v == nil then return default end
  if type(v) ~= 'function' then M.fail(ctx, field, 'a function', v, (level or 1) + 1) end
  return v
end

--- Optional enum: v must be one of the strings in list.
function M.enum(ctx, field, v, list, default, level)
  if v == nil then return default end
  for _, s in ipairs(list) do if v == s then return v end end
  M.fail(ctx, field, 'one of "' .. table.concat(list, '", "') .. '"', v, (level or 1) + 1)
end

local core_mod
--- The binding (`qoslab.core`), loaded on the first call: a module that
-- needs it only in its functions loads without it.
-- @treturn table qoslab.core
-- @raise require's error when the binding cannot be loaded
function M.core()
  if not core_mod then core_mod = require 'qoslab.core' end
  return core_mod
end

--- A shallow copy of t read raw (no `__pairs`), as the binding's checks
-- read an options table.
-- @tparam table t
-- @treturn table a new table with t's keys and values
function M.raw_copy(t)
  local c = {}
  for k, v in next, t do c[k] = v end
  return c
end

return M
