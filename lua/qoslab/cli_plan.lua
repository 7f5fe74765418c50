--- Subcommands `run`, `demo` and `cleanup` of bin/qoslab (`netem` is in qoslab.cli_netem).
--
-- `qoslab run PLAN.lua [--out DIR] [--resume] [--guest|--host] [--quick] [-- ARGS...]`
-- runs a plan file. The file is a Lua chunk; it sees:
--
-- * the global `qoslab` (the module, as `require 'qoslab'`),
-- * the global `QOSLAB_RUN = {file, out, resume, quick, backend = "host"|"guest", args}`,
-- * `...` = the script arguments after `--`,
-- * `qoslab.plan` defaults set from the flags, so `plan.sweep{...}` writes to
--   `--out` and honours `--resume` without the plan naming them.
--
-- Where the host kernel lacks sch_netem and the plan uses netem (its text
-- mentions `impair` or `netem`), or with `--guest`, the plan runs inside the
-- qemu guest (qoslab.vm) with DIR mounted read-write at the same path, so
-- results land in the host's DIR point by point. SIGINT/SIGTERM end the run
-- through a Lua error, so to-be-closed testbeds and netem scopes are removed;
-- the exit status is then 130/143.
-- @module qoslab.cli_plan
local cli = require 'qoslab.cli'
local plan = require 'qoslab.plan'
local fs = require 'qoslab.fs'

local M = {}

local EXIT_SIGINT = 130

local function eprint(...)
  io.stderr:write(table.concat({ ... }), '\n')
  io.stderr:flush()
end

local function try_require(name)
  local ok, mod = pcall(require, name)
  if ok then return mod end
  if tostring(mod):find("module '" .. name .. "' not found", 1, true) then return nil end
  error(mod, 0)
end

local function core()
  return try_require('qoslab.core')
end

local function now_s()
  local c = core()
  return c and c.now() or os.time()
end

--- Exit status for an error: 130/143 when it came from SIGINT/SIGTERM, else `other`.
function M.exit_status(err, other)
  return (cli.signal_status(err)) or other
end

local function install_signals()
  local c = core()
  if c and c.signals_install then c.signals_install() end
end

--- Default results folder: results/<plan name>-<UTC time>.
function M.default_out(file)
  local base = (file:match('([^/]+)$') or file):gsub('%.lua$', '')
  return 'results/' .. base .. '-' .. os.date('!%Y%m%d-%H%M%S')
end

--- Whether a plan's text uses netem (the test for carrying it into the guest).
function M.needs_netem(source)
  return source:find('impair', 1, true) ~= nil or source:find('netem', 1, true) ~= nil
end

local function read_all(path)
  local f, err = io.open(path, 'r')
  if not f then return nil, err end
  local s = f:read('a')
  f:close()
  return s
end

local function host_has_netem()
  local vm = try_require('qoslab.vm')
  if vm and vm.host_has_netem then return vm.host_has_netem() end
  -- Without the VM module: the module file is the best hint there is.
  if ('\n' .. (read_all('/proc/modules') or '')):find('\nsch_netem ') then return true end
  local rel = (read_all('/proc/sys/kernel/osrelease') or ''):gsub('%s+$', '')
  for _, name in ipairs(fs.list('/lib/modules/' .. rel .. '/kernel/net/sched') or {}) do
    if name:match('^sch_netem%.ko') then return true end
  end
  return false
end

--- Create the results folder (and its parents).
-- @tparam string dir
-- @treturn boolean|nil true if it was made now, false if it existed, nil if
--   it cannot be made
function M.make_out(dir)
  local made = fs.mkdir_p(dir)
  if made == nil then return nil end
  return made
end

--- Remove a folder if it is empty (a failed run that wrote nothing).
-- @tparam string dir
-- @treturn boolean true if removed
function M.remove_if_empty(dir)
  return fs.rmdir_if_empty(dir)
end

local function exit_of(r)
  if r == true then return 0 end
  if math.type(r) == 'integer' then return r end
  if type(r) == 'table' then
    return r.exit_status or r.status or r.code or 0
  end
  return 0
end

--- Run a plan file inside the guest; results land in the host's `out`.
-- @tparam table o `{file, out, resume, quick, timeout_s, args}`
-- @treturn integer exit status
function M.run_in_guest(o)
  local vm = try_require('qoslab.vm')
  if not vm then
    eprint('qoslab run: this kernel has no sch_netem and qoslab.vm is not installed: '
      .. 'cannot run the plan in the guest')
    return 1
  end
  if vm.available then
    local ok, why = vm.available()
    if not ok then
      eprint('qoslab run: this kernel has no sch_netem and the qemu guest cannot run here: ',
        tostring(why))
      return 1
    end
  end
  -- The guest mounts rw_dir at the same absolute path; pass that path.
  local out = fs.realpath(o.out) or o.out
  local args = { '--in-guest', '--out', out }
  if o.resume then args[#args + 1] = '--resume' end
  if o.quick then args[#args + 1] = '--quick' end
  if o.args and #o.args > 0 then
    args[#args + 1] = '--'
    for _, a in ipairs(o.args) do args[#args + 1] = a end
  end
  local t0 = now_s()
  -- A signal stops the guest (vm.run_script forwards it to the harness) and
  -- then raises "interrupted by SIG...".
  local done, r, msg, code = pcall(vm.run_script, { script = o.file, args = args, rw_dir = out,
                                                     timeout_s = o.timeout_s or 3600,
                                                     command = cli.started_as })
  if not done then
    local st = M.exit_status(r, nil)
    if not st then error(r, 0) end
    eprint('qoslab run: interrupted by ', st == EXIT_SIGINT and 'SIGINT' or 'SIGTERM',
      '; the guest was stopped; results so far in ', o.out,
      ' (continue with --resume --out ', o.out, ')')
    return st
  end
  local took = now_s() - t0
  if r == nil then
    eprint('qoslab run: guest run failed: ', tostring(msg), code and (' (' .. code .. ')') or '')
    return M.exit_status(msg, 1)
  end
  local status = exit_of(r)
  eprint(string.format('qoslab run: ran inside the qemu guest (real netem, emulated CPU) in %s; exit %d',
    plan.format_duration(took), status))
  return status
end

--- Run a plan file in this process.
-- @tparam table o `{file, out, resume, quick, backend, args}`
-- @treturn integer exit status (0; 1 plan raised; 2 cannot load; 130/143 signal)
function M.run_here(o)
  local chunk, err = cli.loadfile(o.file)
  if not chunk then
    eprint('qoslab run: cannot load ', o.file, ': ', tostring(err))
    return 2
  end
  local qoslab = try_require('qoslab')
  _G.qoslab = qoslab
  _G.QOSLAB_RUN = { file = o.file, out = o.out, resume = o.resume and true or false,
                    quick = o.quick and true or false, backend = o.backend, args = o.args or {} }
  _G.arg = { [0] = o.file, table.unpack(o.args or {}) }
  -- In the guest, stdout and stderr reach the host as two streams copied
  -- separately, so their lines interleave out of order: progress then goes
  -- to stdout, in order with the tables the plan prints.
  local progress
  if o.backend == 'guest' then
    progress = function(info)
      io.stdout:write(plan.progress_line(info), '\n')
      io.stdout:flush()
    end
  end
  plan.set_defaults { out = o.out, resume = o.resume and true or false, backend = o.backend,
                      quick = o.quick and true or false, progress = progress }
  install_signals()
  local ok, res = xpcall(chunk, cli.error_handler(o.file), table.unpack(o.args or {}))
  -- Objects the plan did not close (no <close>) are finalised now, while
  -- their netns/links/qdiscs can still be removed by their __gc.
  collectgarbage('collect')
  collectgarbage('collect')
  if not ok then
    local status = M.exit_status(res, 1)
    if status ~= 1 then
      eprint('qoslab run: interrupted by ', status == EXIT_SIGINT and 'SIGINT' or 'SIGTERM',
        o.out and ('; results so far in ' .. o.out .. ' (continue with --resume --out '
          .. o.out .. ')') or '')
    else
      eprint('qoslab run: ', o.file, ': ', tostring(res))
    end
    return status
  end
  if math.type(res) == 'integer' then return res end
  return 0
end

local function describe_run(cmd)
  cmd:summary('Run an experiment plan (a Lua script with qoslab loaded).')
  cmd:description('The plan sees the global `qoslab`, the global QOSLAB_RUN = {file, out, '
    .. 'resume, quick, backend, args} and the script arguments (after --) as `...`; '
    .. 'plan.sweep writes to --out and honours --resume by default. Without sch_netem '
    .. 'on this kernel a plan that uses netem runs inside the qemu guest.')
  cmd:argument('file', 'Plan file (Lua).')
  cmd:argument('args', 'Arguments for the plan (after --).'):args('*')
  cmd:option('--out', 'Results folder (default results/<plan>-<UTC time>).')
  cmd:flag('--resume', 'Skip points already in DIR/results.jsonl.')
  cmd:flag('--guest', 'Run inside the qemu guest (real netem) even if the host has netem.')
  cmd:flag('--host', 'Run on this host even if its kernel lacks sch_netem.')
  cmd:flag('--quick', 'Shortened form (fewer points, short runs); also QOSLAB_QUICK=1.')
  cmd:option('--timeout', 'Guest run time limit in seconds.', '3600'):convert(tonumber)
  cmd:flag('--in-guest'):hidden(true)
end

local function quick_flag(a)
  return a.quick or os.getenv('QOSLAB_QUICK') == '1'
end

local function run_cmd(a)
  if a.guest and a.host then
    eprint('qoslab run: --guest and --host exclude each other')
    return 2
  end
  if a.resume and not a.out then
    eprint('qoslab run: --resume needs --out DIR: the results folder to continue')
    return 2
  end
  local chunk, source = cli.loadfile(a.file)  -- source: the text, or why not
  if not chunk then
    eprint('qoslab run: cannot load ', a.file, ': ', tostring(source))
    return 2
  end
  local out = a.out or M.default_out(a.file)
  local o = { file = a.file, out = out, resume = a.resume, quick = quick_flag(a),
              args = a.args, timeout_s = a.timeout, backend = 'host' }
  if a.in_guest then
    o.backend = 'guest'
    return M.run_here(o)
  end
  local made = M.make_out(out)
  if made == nil then
    eprint('qoslab run: cannot create ', out)
    return 1
  end
  eprint('qoslab run: results in ', out)
  local to_guest = a.guest or (not a.host and M.needs_netem(source) and not host_has_netem())
  local status
  if to_guest then
    eprint('qoslab run: ', a.guest and '--guest given' or 'this kernel has no sch_netem',
      ': running the plan inside the qemu guest')
    install_signals()
    status = M.run_in_guest(o)
  else
    status = M.run_here(o)
  end
  if status ~= 0 and made and M.remove_if_empty(out) then
    eprint('qoslab run: nothing was written; removed the empty ', out)
  end
  return status
end

---------------------------------------------------------------------------
-- demo, cleanup
---------------------------------------------------------------------------

--- Path of the demo plan (lua/qoslab/demo.lua, found on package.path).
function M.demo_file()
  return package.searchpath('qoslab.demo', package.path)
end

local function demo_cmd(a)
  if a.guest and a.host then
    eprint('qoslab demo: --guest and --host exclude each other')
    return 2
  end
  local file = M.demo_file()
  if not file then
    eprint('qoslab demo: qoslab/demo.lua not found on package.path')
    return 1
  end
  if a.resume and not a.out then
    eprint('qoslab demo: --resume needs --out DIR: the results folder to continue')
    return 2
  end
  local out = a.out or ('results/demo-' .. os.date('!%Y%m%d-%H%M%S'))
  local made = M.make_out(out)
  if made == nil then
    eprint('qoslab demo: cannot create ', out)
    return 1
  end
  local function finish(status)
    if status ~= 0 and made and M.remove_if_empty(out) then
      eprint('qoslab demo: nothing was written; removed the empty ', out)
    else
      print('qoslab demo: results folder ' .. out)
    end
    return status
  end
  local o = { file = file, out = out, resume = a.resume, quick = quick_flag(a), args = {},
              timeout_s = a.timeout, backend = 'host' }
  print('qoslab demo: results folder ' .. out)
  local use_guest = a.guest or (not a.host and not host_has_netem())
  if use_guest then
    print('qoslab demo: ' .. (a.guest and '--guest given' or 'this kernel has no sch_netem')
      .. ': running the experiment inside the qemu guest (real netem; code runs 10-35x slower there)')
    install_signals()
    local t0 = now_s()
    local status = M.run_in_guest(o)
    print(string.format('qoslab demo: backend guest (qemu, kernel netem inside), took %s, exit %d',
      plan.format_duration(now_s() - t0), status))
    return finish(status)
  end
  print('qoslab demo: backend host (this kernel\'s netem)')
  local t0 = now_s()
  local status = M.run_here(o)
  print(string.format('qoslab demo: backend host, took %s, exit %d',
    plan.format_duration(now_s() - t0), status))
  return finish(status)
end

local function describe_demo(cmd)
  cmd:summary('Reduced reference experiment on a 1 Gbit/s two-namespace testbed.')
  cmd:option('--out', 'Results folder (default results/demo-<UTC time>).')
  cmd:flag('--resume', 'Continue an interrupted demo in --out.')
  cmd:flag('--quick', 'Shortest form (CI).')
  cmd:flag('--guest', 'Run inside the qemu guest even if the host has netem.')
  cmd:flag('--host', 'Run on this host even without sch_netem (fails where netem is needed).')
  cmd:option('--timeout', 'Guest run time limit in seconds.', '1800'):convert(tonumber)
end

local function cleanup_cmd(a)
  local state = require 'qoslab.state'
  local removed = state.cleanup { all = a.all or nil }
  if #removed == 0 then
    print('qoslab cleanup: nothing left behind')
    return 0
  end
  local gone, skipped, failed, files = 0, 0, 0, 0
  -- Names as read from a state file may hold control bytes: print them quoted
  -- when they are not plain.
  local function name(v, plain)
    local s = tostring(v)
    if s:match(plain or '^[%w%-_%.@+]+$') then return s end
    return (string.format('%q', s):gsub('\\\n', '\\n'))
  end
  for _, r in ipairs(removed) do
    local what = r.kind == 'netns' and ('netns ' .. name(r.name))
      or (name(r.kind) .. ' ' .. name(r.ifname) .. (r.netns and (' in netns ' .. name(r.netns)) or ''))
    if r.kind == 'file' then
      files = files + 1
      print('state file ' .. name(r.name, '^[%w%-_%.@+/]+$') .. ': '
        .. (r.skipped and ('skipped (' .. r.skipped .. ')') or tostring(r.error)))
    elseif r.removed then
      print('removed ' .. what)
    elseif r.skipped then
      print('skipped (' .. r.skipped .. '): ' .. what)
      skipped = skipped + 1
    elseif r.error then
      print('not removed: ' .. what .. ': ' .. r.error .. ' (kept in its state file for another try)')
      failed = failed + 1
    else
      print('gone already: ' .. what)
      gone = gone + 1
    end
  end
  print(string.format('qoslab cleanup: %d removed, %d already gone%s%s',
    #removed - files - gone - skipped - failed, gone,
    failed > 0 and string.format(', %d not removed', failed) or '',
    skipped > 0 and string.format(', %d skipped', skipped) or ''))
  return failed > 0 and 1 or 0
end

local function describe_cleanup(cmd)
  cmd:summary('Remove namespaces, links and qdiscs that killed qoslab runs left behind.')
  cmd:flag('--all', 'Also what live qoslab processes recorded (careful).')
end

M.commands = {
  run = { describe = describe_run, run = run_cmd },
  demo = { describe = describe_demo, run = demo_cmd },
  cleanup = { describe = describe_cleanup, run = cleanup_cmd },
}

cli.add('run', M.commands.run)
-- The netem concern may register its own `netem` command; it wins.
cli.add('demo', M.commands.demo)
cli.add('cleanup', M.commands.cleanup)

return M
