--- Run commands and qoslab scripts in a throwaway qemu guest whose kernel
-- has sch_netem, for hosts whose kernel lacks it.
--
-- The guest boots Debian 12's stock kernel (downloaded once with
-- `apt-get download`, unpacked into a cache, never installed) with a busybox
-- initramfs; it sees the host's whole filesystem read-only (writes land in a
-- RAM overlay and vanish with the guest), so the checkout or the installed
-- qoslab runs there as it is. One directory can be shared read-write for
-- results. `run` streams output as the guest writes it; a program that
-- buffers its stdout (C stdio on a non-terminal) shows it late unless run
-- under `stdbuf -oL` (`run_script` does that). The work is done by
-- `run-in-vm.sh` (`qoslab/vm/run-in-vm.sh` beside this file, in the checkout
-- and installed alike; or `$QOSLAB_VM_SCRIPT`), whose header lists
-- the `QOSLAB_VM_*` knobs.
-- Under TCG emulation a boot costs about 3 s and code runs 10-35x slower;
-- netem rates up to about 1 Gbit/s are reproduced. Inside the guest `QOSLAB_IN_VM=1`.
--
-- Needs root, qemu-system-x86, busybox-static, and the first time an apt that
-- can fetch `linux-image-amd64`'s kernel (`make deps` sets all of it up).
-- @module qoslab.vm
local check = require 'qoslab.check'
local fs = require 'qoslab.fs'

local M = {}

local function shq(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- Run a program by argv (no shell); return ok, combined output.
local function run(argv)
  local log = os.tmpname()
  local how, status = fs.run(argv, { output = log })
  local f = io.open(log, 'r')
  local out = f and f:read('a') or ''
  if f then f:close() end
  os.remove(log)
  if how == nil then return false, tostring(status) end
  return how == 'exit' and status == 0, out
end

local is_dir, is_file, cwd = fs.is_dir, fs.is_file, fs.cwd

local function absolute(p, base)
  if p:sub(1, 1) == '/' then return p end
  return (base or cwd()) .. '/' .. p
end

-- Directory holding this file (absolute).
local function here()
  local src = debug.getinfo(1, 'S').source
  local dir = src:sub(1, 1) == '@' and src:sub(2):match('^(.*)/[^/]*$') or '.'
  return absolute(dir)
end

local function self_pid()
  local f = io.open('/proc/self/stat', 'r')
  local s = f and f:read('l') or ''
  if f then f:close() end
  return tonumber(s:match('^(%d+)')) or 0
end

-- The harness script: $QOSLAB_VM_SCRIPT, else vm/run-in-vm.sh beside this
-- file (the checkout's lua/qoslab/vm/, or where make install put it).
-- Returns path or nil.
local function harness()
  local env = os.getenv('QOSLAB_VM_SCRIPT')
  if env and env ~= '' then return is_file(env) and env or nil end
  local p = here() .. '/vm/run-in-vm.sh'
  if is_file(p) then return p end
  return nil
end

-- How to start `qoslab` in the guest: `command` (the argv this process was
-- started with, from qoslab.cli), else the checkout's bin/qoslab if this file
-- is in a checkout, else the installed command on PATH.
local function qoslab_command(command)
  if command then
    local q = {}
    for i, v in ipairs(command) do q[i] = shq(v) end
    return table.concat(q, ' ')
  end
  local bin = here() .. '/../../bin/qoslab'
  if is_file(bin) and is_file(here() .. '/../../lua/qoslab/init.lua') then
    return 'lua5.4 ' .. shq(bin)
  end
  local installed = fs.which('qoslab')
  return installed and shq(installed) or nil
end
M._qoslab_command = qoslab_command

local netem_answer, netem_why -- cached result of host_has_netem()

--- Does this host's kernel run netem? Decided by trying, not by guessing
-- from module lists: a scratch namespace is created (qoslab.netns, over
-- netlink), a netem qdisc is put on its `lo` (qoslab.netem), and the
-- namespace is deleted again (recorded with `qoslab.state` meanwhile, so
-- `qoslab cleanup` removes it if this process is killed). A decided answer
-- is cached for the life of the process.
-- @treturn boolean true if netem can be added here
-- @treturn[opt] string when false, why: qoslab.netem's message (ENOTSUP:
--   the kernel has no sch_netem), or that the probe could not run (not
--   root; that answer is not cached)
-- @usage if not vm.host_has_netem() then return vm.run_script{script = f} end
function M.host_has_netem()
  if netem_answer ~= nil then return netem_answer, netem_why end
  local netns, netem = require 'qoslab.netns', require 'qoslab.netem'
  local ns = string.format('qoslab-probe-%d-%d', self_pid(), math.random(0, 999999))
  local made, msg, code = netns.add(ns)
  if not made then
    return false, string.format('cannot create a scratch network namespace to try netem (needs root): %s (%s)',
      tostring(msg), tostring(code))
  end
  local ok, nmsg, ncode = netem.apply('lo', { delay_ms = 0 }, { netns = ns })
  netns.delete(ns)
  netem_answer = ok ~= nil
  if not netem_answer then
    netem_why = string.format('netem on lo of a scratch namespace: %s (%s)', tostring(nmsg), tostring(ncode))
  end
  return netem_answer, netem_why
end

local available_ok -- true once available() said yes

--- Can a guest run on this machine? Checks, without booting: root, qemu,
-- a static busybox, the accelerator (real KVM or TCG; the nested "PVM"
-- /dev/kvm of some hosts counts as no KVM), and a kernel either in the cache
-- or fetchable through apt. A yes is cached for the life of the process.
-- @treturn[1] true
-- @treturn[2] nil
-- @treturn[2] string why not, with what to install or run
-- @treturn[2] string code: ENOENT (qemu, busybox, the kernel package or the
--   harness script missing), EPERM (not root), ENODEV (KVM forced but
--   unusable), ENOTSUP (busybox not static, qemu without TCG, or already
--   inside the guest), EIO (the check itself failed)
-- @usage local ok, msg, code = vm.available()
function M.available()
  if available_ok then return true end
  if os.getenv('QOSLAB_IN_VM') == '1' then
    return nil, 'qoslab.vm: already inside the qoslab guest (QOSLAB_IN_VM=1); no nested guest', 'ENOTSUP'
  end
  local script = harness()
  if not script then
    return nil, 'qoslab.vm: run-in-vm.sh not found (set QOSLAB_VM_SCRIPT)', 'ENOENT'
  end
  local ok, out = run { 'bash', script, '--check' }
  if ok then
    available_ok = true
    return true
  end
  local code, why = out:match('unavailable: (E[A-Z]+): ([^\n]*)')
  if code then return nil, 'qoslab.vm: no guest can run here: ' .. why, code end
  return nil, 'qoslab.vm: the guest check failed: ' .. (out:gsub('\n$', '')), 'EIO'
end

--- The smallest `opts.timeout_s` of `run` and `run_script`, seconds (a
-- guest's time limit, boot included): `qoslab run --timeout` and `qoslab
-- demo --timeout` are checked against it before anything runs.
M.TIMEOUT_MIN_S = 1

--- The largest `opts.timeout_s` of `run` and `run_script`, seconds: a
-- week (see `TIMEOUT_MIN_S`).
M.TIMEOUT_MAX_S = 7 * 86400

local RUN_KEYS = { cmd = true, rw_dir = true, env = true, timeout_s = true, cwd = true }
local SCRIPT_KEYS = { script = true, args = true, rw_dir = true, env = true,
                      timeout_s = true, cwd = true, command = true }

-- Validate the options run() and run_script() share; returns the argument
-- list for run-in-vm.sh (without the command), or nil, msg, code.
local function common(ctx, o)
  -- level 2: errors point at the caller of run/run_script.
  local rw = check.string(ctx, 'opts.rw_dir', o.rw_dir, nil, 2)
  local dir = check.string(ctx, 'opts.cwd', o.cwd, nil, 2)
  local t = check.number(ctx, 'opts.timeout_s', o.timeout_s, M.TIMEOUT_MIN_S, M.TIMEOUT_MAX_S, 900, 2)
  local env = o.env
  if env ~= nil then check.table(ctx, 'opts.env', env, 2) end
  local names = {}
  for k, v in pairs(env or {}) do
    if type(k) ~= 'string' or not k:match('^[%a_][%w_]*$') then
      check.fail(ctx, 'opts.env', 'keys that are variable names ([A-Za-z_][A-Za-z0-9_]*)', k, 2)
    end
    if type(v) ~= 'string' and type(v) ~= 'number' then
      check.fail(ctx, 'opts.env.' .. k, 'a string or a number', v, 2)
    end
    names[#names + 1] = k
  end
  table.sort(names)
  if rw == '' then check.fail(ctx, 'opts.rw_dir', 'a non-empty string', rw, 2) end
  if dir == '' then check.fail(ctx, 'opts.cwd', 'a non-empty string', dir, 2) end
  if rw and not is_dir(rw) then
    return nil, ctx .. ': opts.rw_dir: no such directory: ' .. rw, 'ENOENT'
  end
  if dir and not is_dir(dir) then
    return nil, ctx .. ': opts.cwd: no such directory: ' .. dir, 'ENOENT'
  end
  local a = { '--timeout', string.format('%d', math.ceil(t)) }
  if rw then a[#a + 1] = '--rw'; a[#a + 1] = rw end
  if dir then a[#a + 1] = '--cwd'; a[#a + 1] = absolute(dir) end
  for _, k in ipairs(names) do
    a[#a + 1] = '--env'; a[#a + 1] = k .. '=' .. tostring(env[k])
  end
  return a
end

local function signal_pending()
  local ok, core = pcall(require, 'qoslab.core')
  if ok and type(core) == 'table' and core.signal_pending then return core.signal_pending() end
  return nil
end

-- The interruption error qoslab.core raises on a signal (code "EINTR"), for
-- `signal`; and the signal such an error names (nil for other errors).
local function interruption(signal)
  return require('qoslab.core').interruption(signal)
end
local function interrupted_by(e)
  local ok, core = pcall(require, 'qoslab.core')
  if ok and type(core) == 'table' and core.interrupted_by then return core.interrupted_by(e) end
  return nil
end

local function send(sig, pid)
  fs.kill(pid, sig)  -- best effort: the harness may have ended already
end

local function boot(args, cmd)
  local ok, msg, code = M.available()
  if not ok then return nil, msg, code end
  -- pdeathsig: if this process dies, the harness gets SIGTERM and stops its
  -- guest instead of running on unattended (setpriv execs bash: the pid
  -- stays the harness's, so a signal can be passed on to it). By argv, no
  -- shell: the arguments reach the harness as they are.
  local argv = { 'setpriv', '--pdeathsig', 'TERM', '--', 'bash', harness() }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  argv[#argv + 1] = '--'
  argv[#argv + 1] = cmd
  io.stdout:flush()
  io.stderr:flush()
  -- Not a waiting call like os.execute (system(3) ignores SIGINT in the
  -- caller while it waits, so `kill -INT` to this process alone would be
  -- lost): the guest's stdout is copied through line by line.
  local p, pid, pcode = fs.popen(argv)
  if not p then return nil, 'qoslab.vm: cannot start the harness: ' .. tostring(pid), pcode end
  local interrupted
  local function pump()
    while true do
      local l, _, errno = p:read('L')
      if l then
        io.stdout:write(l)
        io.stdout:flush()
      elseif errno == 4 then
        -- EINTR: a signal arrived (qoslab's handler is installed).
        local sig = signal_pending()
        if sig then error(interruption(sig), 0) end
      else
        return
      end
    end
  end
  while true do
    local done, e = pcall(pump)
    if done then break end
    local sig = interrupted_by(e)
    if not sig or sig == 'signal' then
      send('TERM', pid)
      pcall(p.close, p)
      error(e, 0)
    end
    -- Pass it on: the harness stops qemu and exits; keep reading until then.
    interrupted = sig
    -- SIGHUP (a closed terminal) stops the guest as SIGTERM does.
    send(sig == 'SIGHUP' and 'TERM' or sig:sub(4), pid)
  end
  local _, how, n = p:close()
  if interrupted then error(interruption(interrupted), 0) end
  if how == 'signal' then return 128 + n end
  return n
end

--- Run a shell command in a fresh guest and return its exit status. The
-- command runs as root under `bash -c`, stdin /dev/null, with loopback up and
-- the modules sch_netem, sch_tbf, sch_htb, sch_ingress, cls_u32, act_mirred,
-- veth, ifb and tun (the native link's device) loaded (others load on demand). Its stdout and stderr are
-- streamed to this process's stdout and stderr as they come.
-- @tparam table opts
-- @tparam string opts.cmd shell command (required, non-empty)
-- @tparam[opt] string opts.rw_dir existing host directory mounted read-write
--   at the same path in the guest (the only place the guest can leave files)
-- @tparam[opt] table opts.env `{NAME = string|number}` set in the guest
-- @tparam[opt=900] number opts.timeout_s seconds, boot included, in
--   [1, 604800] (rounded up); then the guest is killed
-- @tparam[opt] string opts.cwd directory the command starts in (default:
--   this process's current directory)
-- @treturn[1] integer the command's exit status; 124 if it timed out, 125 if
--   the guest itself failed (its console tail is printed on stderr), 128+N if
--   the harness died of signal N
-- @treturn[2] nil
-- @treturn[2] string message
-- @treturn[2] string code: as `available`, or ENOENT for a missing
--   `rw_dir`/`cwd`
-- @raise `"qoslab.vm.run: opts.<field>: expected ..., got ..."` on bad input;
--   the interruption error of qoslab.core (code "EINTR", `signal` "SIGINT" /
--   "SIGTERM", tostring "interrupted by SIGINT") when such a signal
--   reached this process while qoslab's handlers are installed
--   (`qoslab run`): the signal is passed on to the harness, which stops the
--   guest, and the error is raised once it has
-- @usage local st = vm.run{cmd = 'tc qdisc add dev lo root netem delay 10ms'}
function M.run(opts)
  local ctx = 'qoslab.vm.run'
  check.table(ctx, 'opts', opts)
  check.keys(ctx, 'opts', opts, RUN_KEYS)
  if type(opts.cmd) ~= 'string' or opts.cmd == '' then
    check.fail(ctx, 'opts.cmd', 'a non-empty string', opts.cmd)
  end
  local args, msg, code = common(ctx, opts)
  if not args then return nil, msg, code end
  return boot(args, opts.cmd)
end

--- Run a qoslab script in a fresh guest: `qoslab run FILE ARGS...` from
-- this checkout (its bin/qoslab and build) or from the installed tree. The
-- host's `QOSLAB_BUILD`, if set, is passed in. Results reach the host only
-- through `rw_dir`, so point the script's output there.
-- @tparam table opts
-- @tparam string opts.script path of the Lua script (required; relative to
--   `cwd`)
-- @tparam[opt] {string|number,...} opts.args arguments given to the script
-- @tparam[opt] string opts.rw_dir as in `run`
-- @tparam[opt] table opts.env as in `run`
-- @tparam[opt=900] number opts.timeout_s as in `run`
-- @tparam[opt] string opts.cwd as in `run`
-- @tparam[opt] {string,...} opts.command how to start qoslab in the guest
--   (interpreter, its options, the script: what `qoslab.cli.self_command()`
--   gives); default: this checkout's bin/qoslab, else `qoslab` on PATH
-- @treturn[1] integer exit status of `qoslab run` (0 ok, 1 the script
--   raised, 2 it could not be loaded) or 124/125 as in `run`
-- @treturn[2] nil
-- @treturn[2] string message
-- @treturn[2] string code: as `run`, or ENOENT if the script or qoslab is
--   missing
-- @raise `"qoslab.vm.run_script: opts.<field>: expected ..., got ..."` on bad
--   input
-- @usage local st = vm.run_script{script = 'plan.lua', args = {'--out', dir}, rw_dir = dir}
function M.run_script(opts)
  local ctx = 'qoslab.vm.run_script'
  check.table(ctx, 'opts', opts)
  check.keys(ctx, 'opts', opts, SCRIPT_KEYS)
  if type(opts.script) ~= 'string' or opts.script == '' then
    check.fail(ctx, 'opts.script', 'a non-empty string', opts.script)
  end
  local argv = opts.args
  if argv ~= nil then
    check.table(ctx, 'opts.args', argv)
    for k, v in pairs(argv) do
      if math.type(k) ~= 'integer' or k < 1 or k > #argv then
        check.fail(ctx, 'opts.args', 'a list (keys 1..n)', argv)
      end
      if type(v) ~= 'string' and type(v) ~= 'number' then
        check.fail(ctx, 'opts.args[' .. k .. ']', 'a string or a number', v)
      end
    end
  end
  if opts.env ~= nil then check.table(ctx, 'opts.env', opts.env) end
  local env = {}
  for k, v in pairs(opts.env or {}) do env[k] = v end
  local o = { rw_dir = opts.rw_dir, cwd = opts.cwd, timeout_s = opts.timeout_s,
              env = opts.env and env or nil }
  if env.QOSLAB_BUILD == nil and os.getenv('QOSLAB_BUILD') then
    env.QOSLAB_BUILD = os.getenv('QOSLAB_BUILD')
    o.env = env
  end
  local args, msg, code = common(ctx, o)
  if not args then return nil, msg, code end
  local file = absolute(opts.script, opts.cwd and absolute(opts.cwd) or nil)
  if not is_file(file) then
    return nil, ctx .. ': opts.script: no such file: ' .. file, 'ENOENT'
  end
  if opts.command ~= nil then
    check.table(ctx, 'opts.command', opts.command)
    if #opts.command == 0 then check.fail(ctx, 'opts.command', 'a non-empty list of strings', opts.command) end
    for k, v in pairs(opts.command) do
      if math.type(k) ~= 'integer' or k < 1 or k > #opts.command then
        check.fail(ctx, 'opts.command', 'a list (keys 1..n)', opts.command)
      end
      check.cstring(ctx, 'opts.command[' .. k .. ']', v)
      if type(v) ~= 'string' then check.fail(ctx, 'opts.command[' .. k .. ']', 'a string', v) end
    end
  end
  local q = qoslab_command(opts.command)
  if not q then
    return nil, ctx .. ': cannot find bin/qoslab or an installed qoslab command', 'ENOENT'
  end
  -- Line-buffered: in the guest stdout is a file, and progress lines should
  -- reach the host as they are printed, not at exit.
  local cmd = { 'stdbuf -oL -eL', q, 'run', shq(file) }
  for _, v in ipairs(argv or {}) do cmd[#cmd + 1] = shq(v) end
  return boot(args, table.concat(cmd, ' '))
end

return M
