--- The `qoslab` command line (bin/qoslab).
-- @module qoslab.cli
local argparse = require 'argparse'

local M = {}

--- Subcommand table: name -> {describe = fn(parser), run = fn(args) -> exit code}.
-- Concerns add their own subcommands here.
M.commands = {}

M.commands.run = {
  describe = function(cmd)
    cmd:summary('Run a Lua script (an experiment plan) with qoslab loaded.')
    cmd:argument('file', 'Lua script to run.')
    cmd:argument('args', 'Arguments passed to the script as ... and arg.'):args('*')
  end,
  run = function(a)
    local chunk, err = loadfile(a.file)
    if not chunk then
      io.stderr:write('qoslab run: cannot load ', a.file, ': ', err, '\n')
      return 2
    end
    _G.arg = { [0] = a.file, table.unpack(a.args) }
    local ok, e = xpcall(chunk, debug.traceback, table.unpack(a.args))
    if not ok then
      io.stderr:write('qoslab run: ', a.file, ': ', tostring(e), '\n')
      return 1
    end
    return 0
  end,
}

local order = { 'run' }

--- Register a subcommand (used by the concerns that own them).
function M.add(name, spec)
  if not M.commands[name] then order[#order + 1] = name end
  M.commands[name] = spec
end

--- Entry point.
-- @tparam table argv the script's `arg`
-- @treturn integer exit status
function M.main(argv)
  -- Concerns that add subcommands.
  for _, mod in ipairs { 'qoslab.cli_netem', 'qoslab.cli_traffic', 'qoslab.cli_plan' } do
    local ok, err = pcall(require, mod)
    if not ok and not tostring(err):find("module '" .. mod .. "' not found", 1, true) then
      error(err, 0)
    end
  end
  local core = require 'qoslab.core'
  local parser = argparse('qoslab', 'Network QoS experiments: netem, traffic, sweeps.')
  parser:add_help(true)
  parser:flag('--version', 'Print the version and exit.'):action(function()
    print('qoslab ' .. core._VERSION); os.exit(0)
  end)
  parser:command_target('command')
  parser:require_command(true)
  for _, name in ipairs(order) do
    local cmd = parser:command(name)
    M.commands[name].describe(cmd)
  end
  local args = { table.unpack(argv, 1) }
  local ok, a = parser:pparse(args)
  if not ok then
    io.stderr:write(parser:get_usage(), '\n', 'qoslab: error: ', a, '\n')
    return 2
  end
  return M.commands[a.command].run(a) or 0
end

return M
