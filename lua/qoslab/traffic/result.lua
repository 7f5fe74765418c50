--- Result tables of the traffic engine: their metatable (`tostring` is the
-- summary) and the options a test ran with (see qoslab.traffic).
-- @module qoslab.traffic.result
local summary = require 'qoslab.traffic.summary'

local M = {}

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

-- ------------------------------------------------------------ results ----

--- Metatable of result tables: only `__tostring` (the summary) and `__name`.
M.Result = { __name = 'qoslab.Result' }
M.Result.__tostring = function(res) return summary.summary(res) end

local function as_result(res, opts)
  if type(res) == 'table' then
    if opts and res.options == nil then res.options = copy(opts) end
    setmetatable(res, M.Result)
  end
  return res
end
M.as_result = as_result

return M
