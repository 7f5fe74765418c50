--- Subcommands `run`, `demo` and `cleanup` of bin/qoslab (`netem` is in qoslab.cli.netem).
--
-- `qoslab run PLAN.lua [--out DIR] [--resume] [--backend auto|netem|link]
-- [--guest|--host] [--quick] [--host-map ROLE=[user@]addr[:port] ...]
-- [--ssh-identity FILE] [--ssh-option KEY=VALUE ...] [--remote-qoslab PATH]
-- [-- ARGS...]` runs a plan file. The file is a Lua chunk; it sees:
--
-- * the global `qoslab` (the module, as `require 'qoslab'`),
-- * the global `QOSLAB_RUN = {file, out, resume, quick, where = "host"|"guest",
--   backend = "netem"|"link", args, hosts}` (where it runs; what its testbeds
--   impair with; `hosts`: the host mapping of the flags, as
--   `qoslab.hosts.configured()` returns it, or nil),
-- * `...` = the script arguments after `--`,
-- * `qoslab.plan` defaults set from the flags, so `plan.sweep{...}` writes to
--   `--out` and honours `--resume` without the plan naming them, and records
--   where it ran and the backend.
--
-- The backend (`--backend`, default "auto"): "auto" is kernel netem where
-- the kernel has sch_netem and otherwise qoslab's native impairment link
-- (qoslab.testbed's `backend = "link"`), on this host either way; "netem" on a
-- kernel without sch_netem carries a plan that uses netem (its text mentions
-- `impair` or `netem`) into the qemu guest (qoslab.vm) with DIR mounted
-- read-write at the same path, so results land in the host's DIR point by
-- point; "link" runs on this host (the native link is what a kernel without
-- sch_netem has; a run in the guest takes the guest's kernel netem). With
-- "auto" a plan that calls qoslab.netem itself (not through a testbed) goes
-- to the guest too. `--guest` and `--host` choose the place outright. A run
-- with `--host-map` stays on this host (its hosts are reached over ssh from
-- here; `qoslab.hosts.get(role)` hands the plan their handles) and its
-- meta.json gets `hosts = {ROLE = host:info()}`. SIGINT/SIGTERM end the run
-- through a Lua error, so to-be-closed testbeds and netem scopes are removed;
-- the exit status is then 130/143.
-- @module qoslab.cli.plan
local cli = require 'qoslab.cli'
local plan = require 'qoslab.plan'
local fs = require 'qoslab.fs'

local M = {}

local SIGNAL_NAMES = { [129] = 'SIGHUP', [130] = 'SIGINT', [143] = 'SIGTERM' }

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

--- A path as a shell word: as it is when plain, else single-quoted.
function M.shell_quote(p)
  p = tostring(p)
  if p:match('^[%w%-_%./@+=:,]+$') and p:sub(1, 1) ~= '-' then return p end
  return "'" .. p:gsub("'", "'\\''") .. "'"
end

--- Exit status for an error: 129/130/143 when it came from SIGHUP/SIGINT/SIGTERM, else `other`.
function M.exit_status(err, other)
  return (cli.signal_status(err)) or other
end

local function install_signals()
  local c = core()
  if c and c.signals_install then c.signals_install() end
end

--- The plan's name: its file name without ".lua".
function M.plan_name(file)
  return ((file:match('([^/]+)$') or file):gsub('%.lua$', ''))
end

--- Default results folder: results/<plan name>-<UTC time>.
function M.default_out(file)
  return 'results/' .. M.plan_name(file) .. '-' .. os.date('!%Y%m%d-%H%M%S')
end

-- The file in a results folder that names the plan whose results it holds.
local MARK = 'qoslab-run.json'

local function read_mark(dir)
  local text = plan._read_text(dir .. '/' .. MARK, 65536, 'run record')
  if not text then return nil end
  local ok, v = pcall(require('cjson').decode, text)
  return ok and type(v) == 'table' and type(v.plan) == 'string' and v.plan or nil
end

local function write_mark(dir, name)
  if fs.is_file(dir .. '/' .. MARK) then return end
  fs.write_file(dir .. '/' .. MARK, require('cjson').encode { plan = name } .. '\n')
end

-- The run's end in its mark, for the report page: `exit_status` and, when
-- the plan raised, `error` (a resumed run that ends well drops the old one).
local function mark_end(dir, status, err)
  local cjson = require 'cjson'
  local text = plan._read_text(dir .. '/' .. MARK, 65536, 'run record')
  local ok, v = pcall(cjson.decode, text or '')
  if not ok or type(v) ~= 'table' then return end
  v.exit_status, v.error = status, status ~= 0 and err ~= nil and tostring(err) or nil
  fs.write_file(dir .. '/' .. MARK, cjson.encode(v) .. '\n')
end

--- The results folder of a run, made now: `out` as given (an error when it
-- exists with files in it and `resume` is not set, or, with `resume`, when
-- it holds another plan's run), else a new folder
-- `results/<plan>-<UTC time>[-N]` (N = 2, 3, ...: mkdir fails on an
-- existing one, so two runs in the same second get two folders).
-- @tparam string cmdname "run" or "demo" (for messages)
-- @tparam string file the plan file
-- @tparam string|nil out --out
-- @tparam boolean resume --resume
-- @treturn string|nil the folder, or nil, exit status (2: bad --out, 1: the
--   folder cannot be made), after a message on stderr
-- @treturn boolean whether it was made now
function M.prepare_out(cmdname, file, out, resume)
  local name = M.plan_name(file)
  local function fail(status, ...)
    eprint('qoslab ', cmdname, ': ', ...)
    return nil, status
  end
  if out == '' then return fail(2, '--out: expected a folder path, got an empty string') end
  if out then
    if fs.kind(out) and not fs.is_dir(out) then
      return fail(2, '--out ', M.shell_quote(out), ' exists and is not a folder')
    end
    local names = fs.is_dir(out) and fs.list(out) or {}
    if #names == 1 and names[1] == MARK then names = {} end
    if not resume and #names > 0 then
      return fail(2, '--out ', M.shell_quote(out), ' exists and is not empty: pass --resume to ',
        'continue the run in it, or another --out')
    end
    if resume then
      local recorded = read_mark(out)
      if recorded and recorded ~= name then
        return fail(2, '--resume: ', M.shell_quote(out), ' holds a run of plan "', recorded,
          '", not "', name, '": resume it with that plan, or pass another --out')
      end
    end
    local made, err, code = fs.mkdir_p(out)
    if made == nil then return fail(code == 'EINVAL' and 2 or 1, tostring(err), ' (', tostring(code), ')') end
    write_mark(out, name)
    return out, made
  end
  local base = M.default_out(file)
  local parent = base:match('^(.*)/[^/]*$')
  local ok, err, code = fs.mkdir_p(parent)
  if ok == nil then return fail(1, tostring(err), ' (', tostring(code), ')') end
  local lfs = require 'lfs'
  for n = 1, 1000 do
    local dir = n == 1 and base or (base .. '-' .. n)
    local made, merr, errno = lfs.mkdir(dir)
    if made then
      write_mark(dir, name)
      return dir, true
    end
    if errno ~= 17 then  -- EEXIST: taken by another run, try the next
      return fail(1, 'cannot create ', dir, ': ', tostring(merr):gsub('^.*: ', ''),
        ' (', fs.errno_code(errno, merr), ')')
    end
  end
  return fail(1, 'cannot create ', base, '-N: 1000 folders of that name exist')
end

--- Write the report page of a results folder (DIR/index.html, see
-- `qoslab.report.page`) and say where it is; a failure is said, not fatal.
-- @tparam string cmdname "run" or "demo" (for messages)
-- @tparam string dir the results folder
-- @treturn string|nil the page's path
function M.write_report(cmdname, dir)
  local ok, path, err, code = pcall(function() return require('qoslab.report.page').write(dir) end)
  if ok and path then
    eprint('qoslab ', cmdname, ': report ', M.shell_quote(path))
    return path
  end
  eprint('qoslab ', cmdname, ': warning: no report page: ', tostring(ok and err or path),
    ok and code and (' (' .. tostring(code) .. ')') or '')
  return nil
end

-- After a run: say where its results are, or that there are none.
local function report_end(cmdname, status, made, o)
  local signame = SIGNAL_NAMES[status]
  -- A folder made for the run that got nothing goes again, however the run
  -- ended (a plan that only prints, too): no folder holding only its mark.
  if made and M.remove_if_empty(o.out) then
    eprint('qoslab ', cmdname, ': nothing was written; removed the empty ', M.shell_quote(o.out))
    return true
  end
  -- Every folder that stays records the run's end; a page only for one
  -- with something to show.
  mark_end(o.out, status, o.error)
  for _, n in ipairs(fs.list(o.out) or {}) do
    if n ~= MARK and n ~= 'meta.json' and n ~= 'index.html' then
      M.write_report(cmdname, o.out)
      break
    end
  end
  if signame then
    eprint('qoslab ', cmdname, ': results so far in ', M.shell_quote(o.out), ' (continue with: qoslab ',
      cmdname, cmdname == 'run' and (' ' .. M.shell_quote(o.file)) or '', ' --resume --out ',
      M.shell_quote(o.out), ')')
  end
  return false
end
M._report_end = report_end

--- Whether a plan's text uses netem (the test for carrying it into the guest).
function M.needs_netem(source)
  return source:find('impair', 1, true) ~= nil or source:find('netem', 1, true) ~= nil
end

--- Whether a plan's text calls kernel netem itself, not through a testbed
-- (`qoslab.netem.apply(...)`, `require 'qoslab.netem'`, `netem.scope(...)`):
-- such a plan needs sch_netem whatever the testbeds' backend.
function M.calls_netem(source)
  return source:find('qoslab%.netem[%.%]\'"]') ~= nil or source:find('netem%.[%a_]+%s*[%({]') ~= nil
end

--- The backends `--backend` takes.
M.BACKENDS = { auto = true, netem = true, link = true }

local function read_all(path)
  local f, err = io.open(path, 'r')
  if not f then return nil, err end
  local s = f:read('a')
  f:close()
  return s
end

local function host_has_netem()
  local vm = try_require('qoslab.vm')
  if vm and vm.host_has_netem then
    local ok, yes = pcall(vm.host_has_netem)
    if ok then return yes and true or false end
  end
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
  local names = fs.list(dir)
  if names and #names == 1 and names[1] == MARK then os.remove(dir .. '/' .. MARK) end
  return fs.rmdir_if_empty(dir)
end

--- Write DIR/meta.json (`qoslab.meta.write_run`: the host, and the
-- testbeds open now) unless the folder has one; a failure is a warning.
-- @tparam string dir results folder
-- @tparam string|nil where "host" or "guest"
-- @tparam string|nil backend "netem" or "link" when no testbed is open (an
--   open testbed's own backend is recorded)
function M.write_meta(dir, where, backend)
  local ok, r, err, code = pcall(function()
    local tbm = package.loaded['qoslab.testbed']
    local open = type(tbm) == 'table' and tbm.open_testbeds and tbm.open_testbeds() or {}
    if open[1] then backend = nil end
    local meta = require 'qoslab.meta'
    -- The hosts of a run across machines (qoslab.hosts.get), each read once.
    local hm = package.loaded['qoslab.hosts']
    local hosts = type(hm) == 'table' and hm.infos and hm.infos() or {}
    if next(hosts) == nil then return meta.write_run(dir, { where = where, backend = backend }) end
    if fs.kind(dir .. '/' .. meta.FILE) then return false end
    local m = meta.run_meta { where = where, backend = backend }
    m.hosts = hosts
    return meta.write(dir, m)
  end)
  if not ok or r == nil then
    eprint('qoslab run: warning: no ', dir, '/meta.json: ', tostring(ok and err or r),
      ok and code and (' (' .. tostring(code) .. ')') or '')
  end
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
  if o.backend_flag and o.backend_flag ~= 'auto' then
    args[#args + 1] = '--backend'
    args[#args + 1] = o.backend_flag
  end
  if o.resume then args[#args + 1] = '--resume' end
  if o.quick then args[#args + 1] = '--quick' end
  if o.args and #o.args > 0 then
    args[#args + 1] = '--'
    for _, a in ipairs(o.args) do args[#args + 1] = a end
  end
  local t0 = now_s()
  -- A signal stops the guest (vm.run_script forwards it to the harness) and
  -- then raises the interruption error (qoslab.core, code "EINTR").
  local done, r, msg, code = pcall(vm.run_script, { script = o.guest_file or o.file, args = args, rw_dir = out,
                                                     timeout_s = o.timeout_s or 3600,
                                                     command = cli.started_as })
  if not done then
    local st = M.exit_status(r, nil)
    if not st then error(r, 0) end
    eprint('qoslab run: interrupted by ', SIGNAL_NAMES[st] or 'a signal', '; the guest was stopped')
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
-- @tparam table o `{file, out, resume, quick, where, backend ("netem"|"link"),
--   backend_flag ("auto"|"netem"|"link": the default of the plan's testbeds), args}`
-- @treturn integer exit status (0; 1 plan raised; 2 cannot load; 130/143 signal)
function M.run_here(o)
  local chunk, err = o.chunk, nil
  if not chunk then chunk, err = cli.loadfile(o.file) end
  if not chunk then
    eprint('qoslab run: cannot load ', o.file, ': ', tostring(err))
    return 2
  end
  local qoslab = try_require('qoslab')
  _G.qoslab = qoslab
  local hm = o.hosts and require('qoslab.hosts')
  if hm then hm.configure(o.hosts) end
  _G.QOSLAB_RUN = { file = o.file, out = o.out, resume = o.resume and true or false,
                    quick = o.quick and true or false, where = o.where, backend = o.backend,
                    args = o.args or {}, hosts = hm and hm.configured() or nil }
  -- Testbeds the plan makes with the default backend take the one chosen.
  local tbm = try_require('qoslab.testbed')
  if type(tbm) == 'table' and tbm.set_default_backend then
    tbm.set_default_backend(o.backend_flag or 'auto')
  end
  _G.arg = { [0] = o.file, table.unpack(o.args or {}) }
  -- In the guest, stdout and stderr reach the host as two streams copied
  -- separately, so their lines interleave out of order: progress then goes
  -- to stdout, in order with the tables the plan prints.
  local progress
  if o.where == 'guest' then
    progress = function(info)
      io.stdout:write(plan.progress_line(info), '\n')
      io.stdout:flush()
    end
  end
  -- DIR/meta.json once per folder a sweep writes to, after its first
  -- record, while the plan's testbed (the path it measures) is up.
  local meta_done = {}
  local function on_record(_, dir)
    if dir and not meta_done[dir] then
      meta_done[dir] = true
      M.write_meta(dir, o.where, o.backend)
    end
  end
  plan.set_defaults { out = o.out, resume = o.resume and true or false, where = o.where,
                      backend = o.backend,
                      quick = o.quick and true or false, progress = progress, on_record = on_record }
  install_signals()
  local ok, res = xpcall(chunk, cli.error_handler(o.file), table.unpack(o.args or {}))
  -- Objects the plan did not close (no <close>) are finalised now, while
  -- their netns/links/qdiscs can still be removed by their __gc.
  collectgarbage('collect')
  collectgarbage('collect')
  -- A plan without a sweep that wrote something still gets the host's.
  if o.out and not meta_done[o.out] then
    for _, n in ipairs(fs.list(o.out) or {}) do
      if n ~= MARK then M.write_meta(o.out, o.where, o.backend) break end
    end
  end
  if hm and ok then
    -- (a plan that failed may not have come to the role it asks for)
    local unused = hm.unused_roles()
    if #unused > 0 then
      eprint('qoslab run: warning: --host-map: the plan asked for no host of role ',
        table.concat(unused, ', '), ' (qoslab.hosts.get)')
    end
  end
  if not ok then
    local status = M.exit_status(res, 1)
    if status ~= 1 then
      eprint('qoslab run: interrupted by ', SIGNAL_NAMES[status] or 'a signal')
    else
      eprint('qoslab run: ', o.file, ': ', tostring(res))
      o.error = tostring(res)
      -- the machine line (QOSLAB_ERRORS=json): this error, with the errno
      -- code it ends with, or EINVAL and the field a caller's mistake names
      cli.failure('qoslab run: ' .. o.file .. ': ' .. tostring(res),
        cli.code_of(res, 'EUNKNOWN'), cli.field_of(res))
    end
    return status
  end
  if math.type(res) == 'integer' then return res end
  return 0
end

-- argparse converter of --timeout: a number of seconds in the range the
-- guest run (qoslab.vm) takes, so a bad one is refused before the plan runs
-- (on this host too, where the limit goes unused).
local function timeout_seconds(s)
  local vm = require 'qoslab.vm'
  local n = tonumber(s)
  if not n or n ~= n or n < vm.TIMEOUT_MIN_S or n > vm.TIMEOUT_MAX_S then
    return nil, string.format("--timeout: expected a number of seconds in [%d, %d], got '%s'",
      vm.TIMEOUT_MIN_S, vm.TIMEOUT_MAX_S, s)
  end
  return n
end

local function describe_run(cmd)
  cmd:summary('Run an experiment plan (a Lua script with qoslab loaded).')
  cmd:description('The plan sees the global `qoslab`, the global QOSLAB_RUN = {file, out, '
    .. 'resume, quick, where, backend, args} and the script arguments (after --) as `...`; '
    .. 'plan.sweep writes to --out and honours --resume by default. Without sch_netem '
    .. 'on this kernel testbeds impair through qoslab\'s native link on this host '
    .. '(--backend auto); --backend netem runs a plan that uses netem inside the qemu guest.')
  cmd:argument('file', 'Plan file (Lua).')
  cmd:argument('args', 'Arguments for the plan (after --).'):args('*')
  cmd:option('--out', 'Results folder (default results/<plan>-<UTC time>).')
  cmd:flag('--resume', 'Skip points already in DIR/results.jsonl.')
  cmd:option('--backend', 'What impairs the testbeds: auto (kernel netem if this kernel has '
    .. 'sch_netem, else the native link), netem (in the qemu guest when this kernel lacks it) '
    .. 'or link (on this host).', 'auto')
  cmd:flag('--guest', 'Run inside the qemu guest (real netem) even if the host has netem.')
  cmd:flag('--host', 'Run on this host even if its kernel lacks sch_netem.')
  cmd:flag('--quick', 'Shortened form (fewer points, short runs); also QOSLAB_QUICK=1.')
  cmd:option('--timeout', 'Guest run time limit in seconds (1-604800).', '3600')
    :convert(timeout_seconds)
  cmd:option('--host-map', 'ROLE=[user@]addr[:port]: the machine (over ssh) that plays ROLE '
    .. '(qoslab.hosts.get(ROLE) in the plan); repeatable. The run stays on this host.'):count('*')
  cmd:option('--ssh-identity', 'Private key file for the ssh connections to the mapped hosts.')
  cmd:option('--ssh-option', 'KEY=VALUE: an ssh_config option for those connections; '
    .. 'repeatable.'):count('*')
  cmd:option('--remote-qoslab', 'The qoslab program on the mapped hosts (default: qoslab on their PATH).')
  cmd:flag('--in-guest'):hidden(true)
end

-- The host flags as qoslab.hosts.configure takes them, nil when none is
-- given, or false after saying which value is wrong.
local function host_flags(a)
  local maps, opts = a.host_map or {}, a.ssh_option or {}
  if #maps == 0 and not a.ssh_identity and #opts == 0 and not a.remote_qoslab then return nil end
  local hosts = require 'qoslab.hosts'
  local cfg = { roles = {} }
  for _, v in ipairs(maps) do
    local role, t = hosts.parse_map(v)
    if not role then
      eprint('qoslab run: --host-map: ', t)
      return false
    end
    if cfg.roles[role] then
      eprint('qoslab run: --host-map: role ', role, ' given twice')
      return false
    end
    cfg.roles[role] = t
  end
  if #maps == 0 then
    eprint('qoslab run: --ssh-identity, --ssh-option and --remote-qoslab need a --host-map '
      .. 'ROLE=[user@]addr[:port] (the host they are for)')
    return false
  end
  if a.ssh_identity then
    if a.ssh_identity == '' or a.ssh_identity:find('\0', 1, true) or not fs.is_file(a.ssh_identity) then
      eprint('qoslab run: --ssh-identity: expected a private key file, got ', string.format('%q', a.ssh_identity),
        fs.kind(a.ssh_identity) and (' (a ' .. fs.kind(a.ssh_identity) .. ')') or ' (no such file)')
      return false
    end
    cfg.identity = fs.realpath(a.ssh_identity) or a.ssh_identity
  end
  if #opts > 0 then
    cfg.options = {}
    for i, v in ipairs(opts) do
      local o, why = hosts.parse_ssh_option(v)
      if not o then
        eprint('qoslab run: --ssh-option: ', why)
        return false
      end
      cfg.options[i] = o
    end
  end
  if a.remote_qoslab then
    if a.remote_qoslab == '' or a.remote_qoslab:find('[%c]') then
      eprint('qoslab run: --remote-qoslab: expected the path of qoslab on the mapped hosts, got ',
        string.format('%q', a.remote_qoslab))
      return false
    end
    cfg.qoslab = a.remote_qoslab
  end
  return cfg
end

local function quick_flag(a)
  return a.quick or os.getenv('QOSLAB_QUICK') == '1'
end

-- The --backend value, or nil after saying why it is refused. `guest`:
-- whether the run goes into the guest.
local function backend_flag(name, a)
  local b = a.backend or 'auto'
  if not M.BACKENDS[b] then
    eprint('qoslab ', name, ': --backend: expected one of auto, netem, link, got ', string.format('%q', b))
    return nil
  end
  return b
end

local GUEST_NO_LINK = ': --backend link: the native link runs on this host, a run in the qemu guest '
  .. 'takes the guest\'s kernel netem; leave out --guest, or take --backend netem with --guest'

-- Where a run goes and what its testbeds impair with: "netem"|"link".
local function resolve_backend(b, to_guest)
  if to_guest then return 'netem' end
  if b ~= 'auto' then return b end
  return host_has_netem() and 'netem' or 'link'
end

local function run_cmd(a)
  if a.guest and a.host then
    eprint('qoslab run: --guest and --host exclude each other')
    return 2
  end
  local bflag = backend_flag('run', a)
  if not bflag then return 2 end
  if bflag == 'link' and (a.guest or a.in_guest) then
    eprint('qoslab run', GUEST_NO_LINK)
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
  local hosts = host_flags(a)
  if hosts == false then return 2 end
  if hosts and (a.guest or a.in_guest) then
    eprint('qoslab run: --host-map and --guest exclude each other: a plan across hosts runs on '
      .. 'this host and reaches its hosts over ssh')
    return 2
  end
  local o = { file = a.file, out = a.out, resume = a.resume, quick = quick_flag(a),
              args = a.args, timeout_s = a.timeout, where = 'host', backend_flag = bflag, chunk = chunk,
              hosts = hosts }
  if a.in_guest then
    o.where, o.backend = 'guest', resolve_backend(bflag, true)
    return M.run_here(o)
  end
  -- Into the guest: asked for; or a plan that needs kernel netem on a kernel
  -- without it (--backend netem: any use of netem; auto: netem called
  -- outside a testbed, which the link cannot stand in for).
  local to_guest = a.guest
  if not to_guest and not a.host and not hosts then
    if bflag == 'netem' then to_guest = M.needs_netem(source) and not host_has_netem()
    elseif bflag == 'auto' then to_guest = M.calls_netem(source) and not host_has_netem() end
  end
  o.backend = resolve_backend(bflag, to_guest)
  if to_guest then
    -- The guest reads the plan by its path: /dev/stdin there is the guest's.
    local real = fs.realpath(a.file)
    if not real or not fs.is_file(real) or real:match('^/proc/') or real:match('^/dev/') then
      eprint('qoslab run: ', a.file, ' is not a file the guest can read: save the plan to a file and run that')
      return 2
    end
    o.guest_file = real
  end
  local out, made = M.prepare_out('run', a.file, a.out, a.resume)
  if not out then return made end
  o.out = out
  eprint('qoslab run: results in ', M.shell_quote(out))
  local status
  if to_guest then
    eprint('qoslab run: ', a.guest and '--guest given' or 'this kernel has no sch_netem',
      ': running the plan inside the qemu guest (backend netem)')
    install_signals()
    status = M.run_in_guest(o)
  else
    eprint('qoslab run: on this host, backend ', o.backend,
      o.backend == 'link' and ' (qoslab\'s native impairment link)' or ' (kernel netem)')
    if hosts then
      local roles = {}
      for r, t in pairs(hosts.roles) do
        roles[#roles + 1] = r .. '=' .. t.ssh .. (t.port and (' port ' .. t.port) or '')
      end
      table.sort(roles)
      eprint('qoslab run: hosts over ssh: ', table.concat(roles, ', '))
    end
    status = M.run_here(o)
  end
  report_end('run', status, made, o)
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
  local bflag = backend_flag('demo', a)
  if not bflag then return 2 end
  if bflag == 'link' and a.guest then
    eprint('qoslab demo', GUEST_NO_LINK)
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
  local out, made = M.prepare_out('demo', 'demo', a.out, a.resume)
  if not out then return made end
  local o
  local function finish(status)
    if not report_end('demo', status, made, o) then
      print('qoslab demo: results folder ' .. out)
    end
    return status
  end
  o = { file = file, out = out, resume = a.resume, quick = quick_flag(a), args = {},
              timeout_s = a.timeout, where = 'host', backend_flag = bflag }
  print('qoslab demo: results folder ' .. out)
  local use_guest = a.guest or (not a.host and bflag == 'netem' and not host_has_netem())
  o.backend = resolve_backend(bflag, use_guest)
  if use_guest then
    print('qoslab demo: ' .. (a.guest and '--guest given' or 'this kernel has no sch_netem')
      .. ': running the experiment inside the qemu guest (real netem; code runs 10-35x slower there)')
    install_signals()
    local t0 = now_s()
    local status = M.run_in_guest(o)
    print(string.format('qoslab demo: in the guest, backend netem (qemu, kernel netem inside), took %s, exit %d',
      plan.format_duration(now_s() - t0), status))
    return finish(status)
  end
  print('qoslab demo: on this host, backend ' .. o.backend .. (o.backend == 'link'
    and ' (qoslab\'s native impairment link)' or ' (this kernel\'s netem)'))
  local t0 = now_s()
  local status = M.run_here(o)
  print(string.format('qoslab demo: on this host, backend %s, took %s, exit %d', o.backend,
    plan.format_duration(now_s() - t0), status))
  return finish(status)
end

local function describe_demo(cmd)
  cmd:summary('Reduced reference experiment on a 1 Gbit/s two-namespace testbed.')
  cmd:option('--out', 'Results folder (default results/demo-<UTC time>).')
  cmd:flag('--resume', 'Continue an interrupted demo in --out.')
  cmd:flag('--quick', 'Shortest form (CI).')
  cmd:option('--backend', 'What impairs the testbed: auto (kernel netem if this kernel has '
    .. 'sch_netem, else the native link), netem (in the qemu guest when this kernel lacks it) '
    .. 'or link (on this host).', 'auto')
  cmd:flag('--guest', 'Run inside the qemu guest even if the host has netem.')
  cmd:flag('--host', 'Run on this host even without sch_netem.')
  cmd:option('--timeout', 'Guest run time limit in seconds (1-604800).', '1800')
    :convert(timeout_seconds)
end

-- `--hosts [user@a,...]`: what dead processes changed on other hosts, over
-- ssh (qoslab.host's ledger). Returns the exit status.
local function cleanup_hosts(list)
  local only
  if list and list ~= '' then
    only = {}
    for h in list:gmatch('[^,%s]+') do only[#only + 1] = h end
  end
  local report = require('qoslab.host').cleanup_dead { hosts = only }
  local failed = 0
  for _, r in ipairs(report) do
    local what = r.kind == 'server' and string.format('qoslab server (pid %s)', tostring(r.pid))
      or string.format('%s on %s%s', r.kind, tostring(r.ifname), r.netns and (' in netns ' .. r.netns) or '')
    what = what .. ' at ' .. tostring(r.host)
    if r.removed then print('removed ' .. what)
    elseif r.skipped then print('skipped (' .. r.skipped .. '): ' .. what)
    elseif r.error then
      failed = failed + 1
      print('not removed: ' .. what .. ': ' .. r.error .. ' (kept in its record for another try)')
    else print('gone already: ' .. what) end
  end
  print(string.format('qoslab cleanup --hosts: %d remote change%s handled%s', #report,
    #report == 1 and '' or 's', failed > 0 and string.format(', %d not removed', failed) or ''))
  return failed > 0 and 1 or 0
end

local function cleanup_cmd(a)
  local state = require 'qoslab.state'
  local removed = state.cleanup { all = a.all or nil }
  local host_status = 0
  if a.hosts then host_status = cleanup_hosts(a.hosts[1]) end
  if #removed == 0 then
    print('qoslab cleanup: nothing left behind' .. (a.hosts and ' on this machine' or ''))
    return host_status
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
    -- a qdisc is named by the device it sits on ("tbf qdisc on qltun-s"),
    -- not as if it were the device
    local dev = r.kind == 'qdisc' and ((r.qdisc_kind and (name(r.qdisc_kind) .. ' ') or '') .. 'qdisc on '
      .. name(r.ifname)) or (name(r.kind) .. ' ' .. name(r.ifname))
    local what = r.kind == 'netns' and ('netns ' .. name(r.name)
        .. (r.unrecorded and ' (named by qoslab, not recorded; its process has ended)' or ''))
      or (dev .. (r.netns and (' in netns ' .. name(r.netns)) or ''))
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
  return (failed > 0 or host_status ~= 0) and 1 or 0
end

local function describe_cleanup(cmd)
  cmd:summary('Remove namespaces, links and qdiscs that killed qoslab runs left behind.')
  cmd:flag('--all', 'Also what live qoslab processes recorded (careful).')
  cmd:option('--hosts', 'Also what killed runs changed on other hosts through qoslab.host '
    .. '(netem, shapers, servers), over ssh; USER@HOST,... limits it to those.'):args('?')
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
