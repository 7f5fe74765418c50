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
    local chunk, err = M.loadfile(a.file)
    if not chunk then
      io.stderr:write('qoslab run: cannot load ', a.file, ': ', err, '\n')
      return 2
    end
    _G.arg = { [0] = a.file, table.unpack(a.args) }
    local ok, e = xpcall(chunk, M.error_handler(a.file), table.unpack(a.args))
    if not ok then
      io.stderr:write('qoslab run: ', a.file, ': ', tostring(e), '\n')
      return 1
    end
    return 0
  end,
}

--- The largest script `loadfile` reads: 16 MiB (a plan is a page of Lua;
-- this only bounds a wrong path such as a log file).
M.SCRIPT_MAX_BYTES = 16 << 20

--- `loadfile` that says why a path cannot be a script instead of Lua's
-- "cannot read ..." or nil, and never hangs: a FIFO (whose open would wait
-- for a writer), a device such as /dev/zero, a socket, a directory or a
-- file over `SCRIPT_MAX_BYTES` is refused with its code before it is read.
-- @tparam string path
-- @treturn function|nil chunk, or nil, message (reason and code, e.g.
--   "is a directory, not a file (EISDIR)")
-- @treturn string the script's text (with the chunk)
function M.loadfile(path)
  if type(path) ~= 'string' or path:find('\0', 1, true) then
    return nil, 'expected a file name without NUL bytes'
  end
  local read_text = require('qoslab.plan')._read_text
  local text, err, code = read_text(path, M.SCRIPT_MAX_BYTES, 'plan file')
  if not text then
    local prefix = 'plan file ' .. path .. ': '
    if tostring(err):sub(1, #prefix) == prefix then err = tostring(err):sub(#prefix + 1) end
    return nil, string.format('%s (%s)', tostring(err), tostring(code))
  end
  -- a first line starting with "#" is skipped, as loadfile does
  local chunk, lerr = load(text:gsub('^#[^\n]*', '', 1), '@' .. path)
  if not chunk then return nil, tostring(lerr) end
  return chunk, text
end

-- A message's leading position when it points into qoslab's own Lua files
-- ("./lua/qoslab/netem.lua:253: ", "./lua/qoslab/cli/plan.lua:9: "): of no
-- use to the reader of a plan.
local function strip_internal(msg)
  return (msg:gsub('^[^\n:]-qoslab/[%w_/]+%.lua:%d+: ', ''))
end

--- The signal an error stands for when it is the interruption error that
-- qoslab.core raises on SIGINT, SIGTERM or SIGHUP (code "EINTR").
-- @param err any error value
-- @treturn string|nil "SIGINT", "SIGTERM", "SIGHUP" ("signal" when it names
--   none), or nil for any other error
function M.interrupted_by(err)
  local ok, core = pcall(require, 'qoslab.core')
  if not (ok and type(core) == 'table' and core.interrupted_by) then return nil end
  return core.interrupted_by(err)
end

--- xpcall handler for a user script: the message alone, positioned at the
-- script's own line (the innermost frame in `file`) when it does not name
-- one already; with QOSLAB_DEBUG=1 the whole stack traceback too. An
-- interruption stays the error object it is (its message treated alike),
-- so its code still decides the exit status.
-- @tparam string file the script's path, as loaded
-- @treturn function handler
function M.error_handler(file)
  return function(e)
    if M.interrupted_by(e) then
      local msg = tostring(e.message)
      if os.getenv('QOSLAB_DEBUG') == '1' then e.message = debug.traceback(msg, 2)
      else e.message = strip_internal(msg) end
      return e
    end
    if type(e) ~= 'string' then
      local mt = getmetatable(e)
      e = (mt and mt.__tostring) and tostring(e) or ('error object ' .. tostring(e))
    end
    if os.getenv('QOSLAB_DEBUG') == '1' then return debug.traceback(e, 2) end
    e = strip_internal(e)
    if e:sub(1, #file + 1) == file .. ':' then return e end
    for level = 2, 250 do
      local info = debug.getinfo(level, 'Sl')
      if not info then break end
      if info.source == '@' .. file and info.currentline and info.currentline > 0 then
        return string.format('%s:%d: %s', file, info.currentline, e)
      end
    end
    return e
  end
end

--- Exit status for an interruption by a signal: 130 for SIGINT, 143 for
-- SIGTERM, 129 for SIGHUP (128 + the signal number, as shells report it),
-- else nil; then the signal's name. Decided by the signal pending in this
-- process or the one an interruption error names (`interrupted_by`).
-- @param err an error or nil
-- @treturn integer|nil
function M.signal_status(err)
  local ok, core = pcall(require, 'qoslab.core')
  local pending = ok and type(core) == 'table' and core.signal_pending and core.signal_pending()
  local named = M.interrupted_by(err)
  if pending == 'SIGTERM' or named == 'SIGTERM' then return 143, 'SIGTERM' end
  if pending == 'SIGHUP' or named == 'SIGHUP' then return 129, 'SIGHUP' end
  if pending == 'SIGINT' or named == 'SIGINT' then return 130, 'SIGINT' end
  return nil
end

--- Join an option and a negative number after it ("-t", "-5" -> "-t-5";
-- "--time", "-5" -> "--time=-5") so argparse takes the number as the
-- option's value instead of as an unknown option "-5"; the converter then
-- says what is wrong with it. Only for options of `cmd` that take a value,
-- and not after "--".
-- @tparam table argv list of strings
-- @tparam table cmd argparse parser (or command) whose options count
-- @treturn table new list
function M.join_negatives(argv, cmd)
  local valued = {}
  for _, o in ipairs(cmd._options or {}) do
    if (o._maxargs or 0) > 0 then
      for _, alias in ipairs(o._aliases) do valued[alias] = true end
    end
  end
  local out, i = {}, 1
  while i <= #argv do
    local a, nxt = argv[i], argv[i + 1]
    if a == '--' then
      for j = i, #argv do out[#out + 1] = argv[j] end
      break
    end
    if valued[a] and type(nxt) == 'string' and nxt:match('^%-%.?%d') then
      out[#out + 1] = a:sub(1, 2) == '--' and (a .. '=' .. nxt) or (a .. nxt)
      i = i + 2
    else
      out[#out + 1] = a
      i = i + 1
    end
  end
  return out
end

--- Move the words of `cmd`'s positional arguments that start with "-" and a
-- digit ("-5ms", "-1") behind a "--", with the other positional words in
-- their order, so argparse hands them to the command (whose own parser says
-- what is wrong with them) instead of calling them unknown options. The
-- options (with their values) stay in front; an argv that has "--" already,
-- or no such word, is returned as it is.
-- @tparam table argv list of strings (after the command's name)
-- @tparam table cmd argparse command whose options count
-- @treturn table new list
function M.dash_words(argv, cmd)
  local known, valued = {}, {}
  for _, o in ipairs(cmd._options or {}) do
    for _, alias in ipairs(o._aliases) do
      known[alias] = true
      if (o._maxargs or 0) > 0 then valued[alias] = true end
    end
  end
  local opts, words, moved, i = {}, {}, false, 1
  while i <= #argv do
    local a = argv[i]
    if a == '--' then return argv end
    local alias = a:match('^(%-%-[^=]+)=')
    if known[a] or (alias and known[alias]) then
      opts[#opts + 1] = a
      if valued[a] and argv[i + 1] ~= nil then opts[#opts + 1] = argv[i + 1]; i = i + 1 end
    elseif a:match('^%-%.?%d') then
      words[#words + 1] = a
      moved = true
    elseif a:sub(1, 1) == '-' then
      opts[#opts + 1] = a   -- an unknown option: argparse names it
    else
      words[#words + 1] = a
    end
    i = i + 1
  end
  if not moved then return argv end
  opts[#opts + 1] = '--'
  for _, w in ipairs(words) do opts[#opts + 1] = w end
  return opts
end

--- Put each option's aliases on one line of its help, "-p, --port <port>",
-- as iperf3 and GNU tools write them: argparse right-aligns them on lines of
-- their own ("    -p <port>," over "--port <port>"), which reads as
-- misaligned beside the other options.
-- @tparam table cmd argparse parser or command
function M.one_line_labels(cmd)
  for _, o in ipairs(cmd._options or {}) do
    if #(o._public_aliases or {}) > 1 then
      o._get_label_lines = function(self)
        local args = table.concat(self:_get_argument_list(), ' ')
        return { table.concat(self._public_aliases, ', ') .. (args ~= '' and (' ' .. args) or '') }
      end
    end
  end
end

--- The one-line usage of a command, as iperf3 prints it: its positional
-- arguments in capitals and "[options]", e.g.
-- "Usage: qoslab client HOST [options]".
-- @tparam table cmd argparse command
-- @treturn string
function M.usage_line(cmd)
  local parts = { 'Usage: qoslab', cmd._name }
  for _, arg in ipairs(cmd._arguments or {}) do
    local n = arg._name:upper()
    local min, max = arg._minargs or 1, arg._maxargs or 1
    if max > 1 then n = n .. '...' end
    parts[#parts + 1] = min == 0 and ('[' .. n .. ']') or n
  end
  parts[#parts + 1] = '[options]'
  return table.concat(parts, ' ')
end

--- Parse like argparse's `pparse`, but also return the (sub)command parser
-- that failed, so its own usage line can be shown.
-- @treturn boolean ok
-- @treturn table|string the result, or the message
-- @treturn table the parser that reported the error
function M.pparse(parser, args)
  local failed, msg
  local ok, res = pcall(parser._parse, parser, args, function(p, m)
    failed, msg = p, m
    error(m, 0)
  end)
  if ok then return true, res end
  if not msg then error(res, 0) end
  return false, msg, failed or parser
end

-- ------------------------------------------------ machine-readable errors --

--- Whether failures also end in a machine line (`QOSLAB_ERRORS=json` in the
-- environment), for a program that drives qoslab (over ssh, say).
-- @treturn boolean
function M.errors_json()
  return os.getenv('QOSLAB_ERRORS') == 'json'
end

--- The field a check message names: "CTX: FIELD: expected ..., got ..."
-- (qoslab.check.fail and the C binding) or "CTX: FIELD: unknown key ...".
-- @param msg an error message
-- @treturn string|nil the field, e.g. "opts.port", or nil when it names none
function M.field_of(msg)
  msg = tostring(msg)
  for _, tail in ipairs { ': expected ', ': unknown key' } do
    local f = msg:match(': ([%a_][%w_%.%[%]]*)' .. tail) or msg:match('^([%a_][%w_%.%[%]]*)' .. tail)
    if f then return f end
  end
  return nil
end

--- The code of a failure's message: the errno-like "(CODE)" it ends with;
-- else "EINVAL" when it names a field as a check does (a caller's mistake,
-- "CTX: FIELD: expected ..."); else `default`.
-- @param msg an error message
-- @tparam string default e.g. "EUNKNOWN"
-- @treturn string
function M.code_of(msg, default)
  msg = tostring(msg)
  return msg:match('%((E[%u%d]+)%)%s*$') or (M.field_of(msg) and 'EINVAL') or default
end

--- Record the failure a command is about to report (its human line is
-- written as always, by the command): with `QOSLAB_ERRORS=json` it becomes
-- the `qoslab-error:` line when the command ends with status 1 or 2. The
-- last one recorded counts.
-- @tparam string message what failed and what to do
-- @tparam[opt] string code errno-like code ("ENOENT", "ENOTSUP", ...;
--   default "EINVAL" for bad input)
-- @tparam[opt] string field the input at fault ("opts.port", "--start-at")
function M.failure(message, code, field)
  M.last_failure = { message = tostring(message), code = code or 'EINVAL', field = field }
end

-- The line of stderr that stands for a failure no command recorded
-- (QOSLAB_ERRORS=json only): io.stderr is a proxy that writes through and
-- keeps the last line ending in an errno-like "(CODE)", else the first line
-- (a command's error comes first, notes such as "nothing was written" after).
local last_line, first_line = nil, nil

local function capture_stderr()
  local real = io.stderr
  local pending = ''
  local proxy = {}
  function proxy.write(self, ...)
    local r = table.pack(real:write(...))
    for i = 1, select('#', ...) do pending = pending .. tostring((select(i, ...))) end
    for line in pending:gmatch('([^\n]*)\n') do
      if line:match('%S') then
        first_line = first_line or line
        if line:match('%(E[%u%d]+%)%s*$') then last_line = line end
      end
    end
    pending = pending:match('[^\n]*$')
    if #pending > 65536 then pending = pending:sub(-65536) end
    if r[1] == real then return self end
    return table.unpack(r, 1, r.n)
  end
  setmetatable(proxy, { __index = function(_, k)
    local v = real[k]
    if type(v) ~= 'function' then return v end
    return function(self, ...)
      if self == proxy then self = real end
      return v(self, ...)
    end
  end, __tostring = function() return tostring(real) end })
  io.stderr = proxy -- luacheck: ignore 122
  return function()
    io.stderr = real -- luacheck: ignore 122
    if pending:match('%(E[%u%d]+%)%s*$') then return pending end
    return last_line or first_line or (pending:match('%S') and pending) or nil
  end
end

--- The `qoslab-error:` line for a failure (the contract of
-- `QOSLAB_ERRORS=json`): `{"message": "...", "code": "ECODE", "field": "..." or null}`.
-- @tparam table f `{ message =, code =, field = }`
-- @treturn string the line, without its newline
function M.error_line(f)
  local cjson = require 'cjson'
  return string.format('qoslab-error: {"message": %s, "code": %s, "field": %s}',
    cjson.encode(tostring(f.message)), cjson.encode(tostring(f.code)),
    f.field and cjson.encode(tostring(f.field)) or 'null')
end

-- The failure to report for an exit status when no command recorded one:
-- the line of stderr kept for it, its trailing "(CODE)" as the code.
local function failure_from(status, line, name)
  local msg = line or string.format('qoslab %s failed (exit status %d)', name or '', status)
  msg = strip_internal(msg)
  return { message = msg, code = M.code_of(msg, status == 2 and 'EINVAL' or 'EUNKNOWN'),
           field = M.field_of(msg) }
end

local order = { 'run' }

--- The field of an argparse error: the option its message starts with
-- ("-p: 'x' is not an integer"), as the command's `fields` table names it
-- (`{ ["-p"] = "opts.port" }`), else the option itself; the argument of
-- "missing argument 'host'"; nil when it names none.
-- @tparam table|string|nil cmd the argparse command that failed, or its name
-- @tparam string msg argparse's message
-- @treturn string|nil
function M.usage_field(cmd, msg)
  msg = tostring(msg)
  local name = type(cmd) == 'table' and cmd._name or cmd
  local spec = name and M.commands[name]
  local fields = spec and spec.fields or {}
  local flag = msg:match('^(%-%-?[%w][%w%-]*)[:=]') or msg:match("option '(%-%-?[%w][%w%-]*)'")
  if flag then
    if fields[flag] then return fields[flag] end
    for _, o in ipairs(type(cmd) == 'table' and cmd._options or {}) do
      for _, alias in ipairs(o._aliases) do
        if alias == flag then
          for _, al in ipairs(o._aliases) do if fields[al] then return fields[al] end end
          return flag
        end
      end
    end
    return flag
  end
  return msg:match("argument '([%w_]+)'")
end

--- Register a subcommand (used by the concerns that own them).
function M.add(name, spec)
  if not M.commands[name] then order[#order + 1] = name end
  M.commands[name] = spec
end

--- The argv this process was started with, so that the same qoslab can be
-- started again (in the qemu guest): the interpreter and its options
-- (`arg[-n] .. arg[-1]`, as a luarocks wrapper passes them) and the script
-- `arg[0]` as an absolute path.
-- @tparam table argv the script's `arg`
-- @treturn {string,...}|nil nil when there is no script path
-- @usage vm.run_script{script = f, command = cli.self_command()}
function M.self_command(argv)
  if type(argv) ~= 'table' or type(argv[0]) ~= 'string' or argv[0] == '' then return nil end
  local first = 0
  while type(argv[first - 1]) == 'string' do first = first - 1 end
  local out = {}
  for i = first, -1 do out[#out + 1] = argv[i] end
  if #out == 0 then out[1] = 'lua5.4' end
  local fs = require 'qoslab.fs'
  local script = argv[0]
  if script:sub(1, 1) ~= '/' then script = fs.realpath(script) or (fs.cwd() .. '/' .. script) end
  out[#out + 1] = script
  return out
end

--- Entry point. With `QOSLAB_ERRORS=json` a run that ends with status 1
-- (a failure of the world) or 2 (bad input) writes, after its usual
-- messages, one line on stderr: `qoslab-error: {"message": "...", "code":
-- "ECODE", "field": "opts.x" or null}` (`error_line`).
-- @tparam table argv the script's `arg`
-- @treturn integer exit status
function M.main(argv)
  if not M.errors_json() then return M.main_status(argv) end
  M.last_failure, last_line, first_line = nil, nil, nil
  local release = capture_stderr()
  local ok, status = pcall(M.main_status, argv)
  local line = release()
  if not ok then error(status, 0) end
  if status == 1 or status == 2 then
    local f = M.last_failure or failure_from(status, line, M.command_name)
    io.stderr:write(M.error_line(f), '\n')
    io.stderr:flush()
  end
  return status
end

--- `main` without the machine line: the exit status of a run.
-- @tparam table argv
-- @treturn integer exit status
function M.main_status(argv)
  -- How this process was started, for the guest to start the same qoslab
  -- (nil when main is called with a plain list, as specs do).
  M.started_as = M.self_command(argv)
  -- Concerns that add subcommands.
  for _, mod in ipairs { 'qoslab.cli.netem', 'qoslab.cli.traffic', 'qoslab.cli.plan',
                       'qoslab.cli.stdtest', 'qoslab.cli.report', 'qoslab.cli.info',
                       'qoslab.cli.shape' } do
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
  local cmds = {}
  for _, name in ipairs(order) do
    local cmd = parser:command(name)
    M.commands[name].describe(cmd)
    M.one_line_labels(cmd)
    cmds[name] = cmd
  end
  local args = { table.unpack(argv, 1) }
  local cmdname
  for _, v in ipairs(args) do
    if v:sub(1, 1) ~= '-' then cmdname = v break end
  end
  if cmdname and cmds[cmdname] then
    local at
    for i, v in ipairs(args) do if v == cmdname then at = i break end end
    local rest = M.join_negatives({ table.unpack(args, at + 1) }, cmds[cmdname])
    if M.commands[cmdname].dash_words then rest = M.dash_words(rest, cmds[cmdname]) end
    args = { table.unpack(args, 1, at) }
    for _, v in ipairs(rest) do args[#args + 1] = v end
  end
  local ok, a, failed = M.pparse(parser, args)
  -- a signal held while the words were parsed: the command does not start
  local held_status, held = M.signal_status()
  if held_status then
    io.stderr:write('qoslab: interrupted by ', held, '\n')
    return held_status
  end
  if not ok then
    local name = failed ~= parser and failed._name or nil
    -- a command may say more about its own parse errors (from its words)
    local spec = name and M.commands[name]
    if spec and spec.explain and cmdname == name then
      local at
      for i, v in ipairs(args) do if v == cmdname then at = i break end end
      a = spec.explain(a, { table.unpack(args, at + 1) }) or a
    end
    -- a command's error: its one usage line, the error, where to read more
    -- (the whole usage block hid the error); the top level lists the commands
    M.failure(a, 'EINVAL', M.usage_field(failed, a))
    if name then
      io.stderr:write(M.usage_line(failed), '\n', 'qoslab ', name, ': error: ', a, '\n',
        'see qoslab ', name, ' --help\n')
    else
      io.stderr:write(failed:get_usage(), '\n', 'qoslab: error: ', a, '\n')
    end
    return 2
  end
  local name = a.command
  M.command_name = name
  local good, status = xpcall(function(parsed)
    -- bin/qoslab held the signals from its start: armed now, where their
    -- interruption error is handled; one that came before is raised here.
    if core.signals_install then core.signals_install() end
    return M.commands[name].run(parsed)
  end, function(e)
    if M.signal_status(e) or os.getenv('QOSLAB_DEBUG') ~= '1' then return e end
    return debug.traceback(e, 2)
  end, a)
  local sig_status, sig = M.signal_status(not good and status or nil)
  -- Ended by a signal: what the command made and did not remove (the
  -- interruption may have come between a creation and the mark its owner
  -- keeps of it) goes now, from this process's own record.
  if sig_status then pcall(function() require('qoslab.state').remove_own() end) end
  -- A command that handled a signal itself returns its status (and has said
  -- so); otherwise a signal received during the run is the run's end status
  -- even when the command (a plan calling pcall) caught the interruption.
  if good and status and status ~= 0 then return status end
  if good and not sig_status then return status or 0 end
  if sig_status then
    io.stderr:write('qoslab ', name, ': interrupted by ', sig, '\n')
    return sig_status
  end
  local text = strip_internal(tostring(status))
  M.failure(text, M.code_of(text, 'EUNKNOWN'), M.field_of(text))
  io.stderr:write('qoslab ', name, ': ', text, '\n')
  return 1
end

return M
