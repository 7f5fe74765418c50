--- Experiments across real hosts: start a qoslab server on another machine,
-- impair its links with netem or a shaper, read its metadata and clock, run
-- commands there and undo it all, over OpenSSH (the `ssh` program, with the
-- user's own configuration, keys and known hosts; no agent of qoslab's).
--
-- Each handle keeps one multiplexed connection: an ssh master (`-M -N`,
-- ControlPersist) whose control socket sits in a private 0700 directory;
-- every call is a short `ssh -S SOCKET` session over it. The far end is the
-- `qoslab` program there, run as `env QOSLAB_ERRORS=json qoslab ...`: its
-- failures come back as `nil, "<name>: message", CODE` like the local
-- calls', its bad-input errors are raised like theirs. Remote arguments are
-- quoted one by one for the remote shell (ssh joins its arguments with
-- spaces), so an argument with spaces, quotes, `$` or `;` arrives as it is.
--
-- Every call has a timeout (`opts.timeout_s`, else the handle's `timeout_s`):
-- on expiry the local ssh is stopped and the remote process too (its pid is
-- known from the first line the remote shell writes), and the call returns
-- `nil, "<name>: <what> timed out after N s ...", "ETIMEDOUT"`.
--
-- Failures of the connection: `EACCES` (the key was refused or the host key
-- is unknown), `ECONNREFUSED`, `EHOSTUNREACH`, `ENETUNREACH`, `ETIMEDOUT`
-- (no answer within `connect_timeout_s`), `ENOENT` (no qoslab program on the
-- host), each with advice.
--
-- What a handle changes on a host (netem, shapers, servers) is undone by
-- `cleanup()` (also at `close()`, at the end of a to-be-closed variable's
-- scope) and recorded in a ledger beside qoslab.state's files, so that
-- after a kill -9 `qoslab cleanup --hosts` removes it over ssh. A remote
-- server ends by itself when its ssh channel closes (`--exit-on-eof`).
--
-- The far host needs sshd's `MaxSessions` (default 10) above the number of
-- servers, clock reads and calls a plan runs on it at once.
-- @module qoslab.host
-- @usage local qoslab = require 'qoslab'
-- local b <close> = qoslab.host{ssh = 'lab@10.0.0.2', identity = '~/.ssh/lab'}
-- local srv <close> = assert(b:server{port = 0})
-- assert(b:shape_apply('eth1', {kind = 'tbf', rate_bps = 100e6}))
-- local res = assert(qoslab.host.localhost():client{host = '10.0.0.2', port = srv:port(), duration_s = 2})
local check = require 'qoslab.check'
local fs = require 'qoslab.fs'
local ssh = require 'qoslab.host.ssh'
local ledger = require 'qoslab.host.ledger'
local decode, ssh_base, ssh_failure, ensure_master = ssh.decode, ssh.ssh_base, ssh.ssh_failure, ssh.ensure_master
local command_argv, remote_pid = ssh.command_argv, ssh.remote_pid
local strip_pid, stop_remote = ssh.strip_pid, ssh.stop_remote
local end_local, exec_start, exec_abort, exec_finish = ssh.end_local, ssh.exec_start, ssh.exec_abort, ssh.exec_finish
local exec, far_failure, qoslab_argv, qdone = ssh.exec, ssh.far_failure, ssh.qoslab_argv, ssh.qdone
local NONE, json_of, qjson = ssh.NONE, ssh.json_of, ssh.qjson
local remember, forget, find_change = ledger.remember, ledger.forget, ledger.find_change

-- Specs go out through dkjson: it writes integers exactly (cjson only to
-- 14 significant digits).
local function encode(v) return require('dkjson').encode(v) end

local M = {}

local Host = {}
Host.__index = Host
Host.__name = 'qoslab.Host'

local Server = {}
Server.__index = Server
Server.__name = 'qoslab.HostServer'

local CTX = 'qoslab.host'
local function now_s() return require('qoslab.timer').now() end
local function now_ns() return require('qoslab.timer').now_ns() end

--- A word quoted for a POSIX shell: `'...'`, a `'` inside as `'\''`.
-- @tparam string s
-- @treturn string
-- @function shell_quote
M.shell_quote = ssh.shell_quote
M._master_socket = ssh._master_socket
-- Handles alive in this process (weak), for the ledger's removal.
M._handles = ledger._handles
-- ------------------------------------------------------------- checks ----

local function check_spec(spec, level)
  level = (level or 1) + 1
  check.table(CTX, 'spec', spec, level)
  check.keys(CTX, 'spec', spec, { ssh = true, port = true, identity = true, options = true,
    qoslab = true, connect_timeout_s = true, timeout_s = true, name = true }, level + 1)
  local s = spec.ssh
  if s ~= nil and (type(s) ~= 'string' or s == '' or s:find('[%s%z]') or s:sub(1, 1) == '-'
      or s:find('@', 1, true) and not s:match('^[^@]+@[^@%-][^@]*$')) then
    check.fail(CTX, 'ssh', '"user@host" or "host" (no spaces, neither starting with "-")', s, level)
  end
  check.integer(CTX, 'port', spec.port, 1, 65535, nil, level)
  check.cstring(CTX, 'identity', spec.identity, nil, level)
  -- (ssh reads "~/" as the home directory)
  if spec.identity ~= nil and not fs.is_file((spec.identity:gsub('^~/', (os.getenv('HOME') or '~') .. '/'))) then
    check.fail(CTX, 'identity', 'a private key file that exists', spec.identity, level)
  end
  if spec.options ~= nil then
    check.table(CTX, 'options', spec.options, level)
    for k, o in pairs(spec.options) do
      if math.type(k) ~= 'integer' or k < 1 or k > #spec.options then
        check.fail(CTX, 'options', 'a list of "Key=Value" strings', spec.options, level)
      end
      if type(o) ~= 'string' or not o:match('^%a[%w]*=[^%z\n]*$') then
        check.fail(CTX, 'options[' .. k .. ']', 'a "Key=Value" string (an ssh_config(5) option)', o, level)
      end
    end
  end
  check.cstring(CTX, 'qoslab', spec.qoslab, nil, level)
  if spec.qoslab == '' then check.fail(CTX, 'qoslab', 'a program name or path', spec.qoslab, level) end
  check.number(CTX, 'connect_timeout_s', spec.connect_timeout_s, 1, 3600, nil, level)
  if spec.connect_timeout_s and math.type(spec.connect_timeout_s) ~= 'integer'
      and spec.connect_timeout_s ~= math.floor(spec.connect_timeout_s) then
    check.fail(CTX, 'connect_timeout_s', 'a whole number of seconds in [1, 3600] (ssh\'s ConnectTimeout)',
      spec.connect_timeout_s, level)
  end
  check.number(CTX, 'timeout_s', spec.timeout_s, 0.001, 1e6, nil, level)
  check.string(CTX, 'name', spec.name, nil, level)
end

local function timeout_of(self, ctx, opts, level)
  local t = opts and opts.timeout_s
  if t ~= nil then check.number(ctx, 'opts.timeout_s', t, 0.001, 1e6, nil, (level or 1) + 1) end
  return t or self.timeout_s
end

-- -------------------------------------------------------- construction ----

local function make(spec, level)
  local self = setmetatable({
    ssh = spec.ssh, port = spec.port and math.tointeger(spec.port), identity = spec.identity,
    options = {}, qoslab = spec.qoslab or 'qoslab',
    connect_timeout_s = math.tointeger(spec.connect_timeout_s or 10),
    timeout_s = spec.timeout_s or 60, changes = {}, closed = false,
  }, Host)
  self.name = spec.name or spec.ssh or 'localhost'
  for i, o in ipairs(spec.options or {}) do self.options[i] = o end
  if self.ssh then
    local dir, err, code = fs.mkdtemp('/tmp/qoslab-ssh-')
    if not dir then
      error(string.format('%s: cannot make the control directory: %s (%s)', CTX, err, code), level + 1)
    end
    self.dir = dir
    self.control_path = dir .. '/%C'
  end
  M._handles[self] = true
  return self
end

--- Connect to a host over ssh. The connection is opened by the first call
-- that needs it (and opened again when it was lost).
-- @tparam table spec `{ssh = "user@host"|"host", port = 1..65535 (ssh's -p),
--   identity = PATH (a private key: ssh -i, with IdentitiesOnly), options =
--   {"Key=Value", ...} (ssh -o), qoslab = "qoslab" (the program there: a
--   name looked up in the remote PATH, or a path), connect_timeout_s = 10
--   (whole seconds: ssh's ConnectTimeout), timeout_s = 60 (each call's
--   default timeout, seconds), name = (the prefix of messages; default ssh)}`
-- @treturn qoslab.Host a to-be-closed handle: `close()` (and the end of a
--   `<close>` variable's scope) runs `cleanup()` then stops the connection
-- @raise on an unknown key or a bad field: `"qoslab.host: ssh: expected
--   "user@host" ..., got 42"`
-- @usage local b <close> = qoslab.host{ssh = 'root@10.9.0.2', options = {'StrictHostKeyChecking=yes'}}
function M.new(spec)
  check_spec(spec, 1)
  if spec.ssh == nil then
    check.fail(CTX, 'ssh', '"user@host" or "host" (no spaces, neither starting with "-")', nil, 1)
  end
  return make(spec, 2)
end

--- The same interface for this machine, without ssh: the same methods, the
-- same results (commands run here, the qoslab program is this checkout's
-- bin/qoslab when qoslab was loaded from a checkout, else "qoslab").
-- Also `qoslab.host["local"]()`.
-- @tparam[opt] table spec `{qoslab =, timeout_s =, name = "localhost"}`
-- @treturn qoslab.Host
-- @raise on an unknown key or a bad field
-- @usage local here <close> = qoslab.host.localhost()
function M.localhost(spec)
  spec = spec or {}
  check.table(CTX .. '.localhost', 'spec', spec)
  check.keys(CTX .. '.localhost', 'spec', spec, { qoslab = true, timeout_s = true, name = true }, 2)
  check_spec(spec, 1)
  local s = { qoslab = spec.qoslab, timeout_s = spec.timeout_s, name = spec.name or 'localhost' }
  if not s.qoslab then
    local init = package.searchpath('qoslab', package.path)
    init = init and fs.realpath(init)
    local top = init and init:match('^(.*)/lua/qoslab/init%.lua$')
    if top and fs.is_file(top .. '/bin/qoslab') then
      s.qoslab = top .. '/bin/qoslab'
    end
  end
  return make(s, 2)
end
M['local'] = M.localhost

setmetatable(M, { __call = function(_, spec) return M.new(spec) end })

-- --------------------------------------------------------------- methods ----

local function check_open(self, ctx)
  if getmetatable(self) ~= Host then error(ctx .. ': expected a qoslab.Host (call it with ":")', 3) end
  if self.closed then error(ctx .. ': the handle is closed', 3) end
end

--- Run a program on the host. sshd does not stop a program whose channel
-- closed, so a timeout (or an interruption) stops it there by its pid; one
-- still running when this process is killed outlives it (a server does not:
-- it watches its channel).
-- @tparam {string,...} argv the program and its arguments (each one reaches
--   the program as it is: quoted for the remote shell)
-- @tparam[opt] table opts `{timeout_s = (default the handle's), stdin = STRING
--   (fed to the program, then EOF; default empty)}`
-- @treturn table `{status = exit status (128 + N when killed by signal N),
--   stdout = STRING, stderr = STRING}`
-- @return or nil, message, CODE ("ETIMEDOUT": the program was stopped there;
--   the connection's codes)
-- @raise on a bad argv or opts
-- @usage local r = assert(b:run{'ip', '-br', 'addr'}); print(r.stdout)
function Host:run(argv, opts)
  local ctx = 'qoslab.Host:run'
  check_open(self, ctx)
  check.table(ctx, 'argv', argv)
  if #argv < 1 then check.fail(ctx, 'argv', 'a list of at least one string', argv) end
  for i = 1, #argv do check.cstring(ctx, 'argv[' .. i .. ']', argv[i]) end
  if argv[1] == '' then check.fail(ctx, 'argv[1]', 'a program name', argv[1]) end
  opts = opts or {}
  check.table(ctx, 'opts', opts)
  check.keys(ctx, 'opts', opts, { timeout_s = true, stdin = true }, 2)
  check.string(ctx, 'opts.stdin', opts.stdin)
  local t = timeout_of(self, ctx, opts)
  return exec(self, 'run ' .. argv[1], argv, opts.stdin, t)
end

-- Server flags from traffic.server's options.
local SERVER_FLAGS = {
  port = '-p', bind = '-B', bind_address = '-B', netns = '--netns', window_bytes = '-w',
  idle_timeout_s = '--idle-timeout', max_tests = '--max-tests',
  max_tests_per_address = '--max-tests-per-address', max_streams_per_address = '--max-streams-per-address',
  max_unidentified = '--max-unidentified', max_unidentified_per_address = '--max-unidentified-per-address',
  data_idle_s = '--data-idle', max_duration_s = '--max-duration', test_buffer_bytes = '--test-buffer',
}

local function num_word(v)
  if math.type(v) == 'integer' then return tostring(v) end
  if math.tointeger(v) then return tostring(math.tointeger(v)) end
  return string.format('%.17g', v)
end

--- Start a qoslab server on the host (`qoslab server --announce
-- --exit-on-eof` there, over its own ssh channel: it ends when the handle
-- closes, or when this process dies).
-- @tparam[opt] table opts `{port = 0 (0: a free one), bind = ADDRESS, netns = NS,
--   window_bytes =, idle_timeout_s =, max_tests =, max_tests_per_address =,
--   max_streams_per_address =, max_unidentified =, max_unidentified_per_address =,
--   data_idle_s =, max_duration_s =, test_buffer_bytes = (as qoslab.traffic.server's),
--   timeout_s = (how long it may take to listen; default the handle's)}`
-- @treturn qoslab.HostServer a to-be-closed handle: `port()` (the port it
--   listens on), `pid()` (its pid there), `.host` (this handle), `close()`
--   (ends it there and waits for that)
-- @return or nil, message, CODE (the far end's, e.g. "EADDRINUSE"; "ETIMEDOUT")
-- @raise on an unknown key or a bad value
-- @usage local srv <close> = assert(b:server{port = 0, netns = 'lab'}); print(srv:port())
function Host:server(opts)
  local ctx = 'qoslab.Host:server'
  check_open(self, ctx)
  opts = opts or {}
  check.table(ctx, 'opts', opts)
  local allowed = { timeout_s = true }
  for k in pairs(SERVER_FLAGS) do allowed[k] = true end
  check.keys(ctx, 'opts', opts, allowed, 2)
  if opts.bind and opts.bind_address then
    check.fail(ctx, 'opts.bind', 'one of bind and bind_address', opts.bind)
  end
  check.integer(ctx, 'opts.port', opts.port, 0, 65535)
  check.netns(ctx, 'opts.netns', opts.netns)
  local t = timeout_of(self, ctx, opts)
  local args = { 'server', '--announce', '--exit-on-eof', '-p', num_word(opts.port or 0) }
  local keys = {}
  for k in pairs(opts) do if SERVER_FLAGS[k] and k ~= 'port' then keys[#keys + 1] = k end end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v = opts[k]
    if type(v) == 'number' then v = num_word(v)
    elseif type(v) ~= 'string' then check.fail(ctx, 'opts.' .. k, 'a string or a number', v) end
    args[#args + 1] = SERVER_FLAGS[k]
    args[#args + 1] = v
  end
  local ok, merr, mcode = ensure_master(self)
  if not ok then return nil, merr, mcode end
  local argv = qoslab_argv(self, args)
  -- Its output goes to files: a long-lived server's lines must never fill a
  -- pipe no one reads.
  local dir = self.dir or assert(fs.mkdtemp('/tmp/qoslab-host-'))
  self.dir = dir
  self.nserver = (self.nserver or 0) + 1
  local out_path = string.format('%s/server-%d.out', dir, self.nserver)
  local err_path = string.format('%s/server-%d.err', dir, self.nserver)
  local p, perr, pcode = fs.process(command_argv(self, argv),
    { stdin = 'pipe', stdout = out_path, stderr = err_path, new_group = true })
  if not p then return nil, self.name .. ': cannot start ssh: ' .. tostring(perr), pcode end
  local function read(path)
    local f = io.open(path)
    if not f then return '' end
    local text = f:read('a')
    f:close()
    return text
  end
  local deadline = now_s() + t
  local port, rpid
  while true do
    local line = read(out_path):match('^([^\n]*)\n')
    if line then
      local ev = decode(line)
      if type(ev) == 'table' and ev.event == 'listening' and math.type(ev.port) == 'integer' then
        port, rpid = ev.port, math.tointeger(ev.pid)
        break
      end
      stop_remote(self, remote_pid(read(err_path)))
      end_local(p)
      return nil, string.format('%s: the server there said %q, not that it listens; is its qoslab older '
        .. 'than this one?', self.name, line), 'EPROTO'
    end
    local how, status = p:wait(0)
    if how then
      p:close()
      local err = read(err_path)
      local started = remote_pid(err) ~= nil
      if self.ssh and how == 'exit' and status == 255 and not started then return nil, ssh_failure(self, err) end
      local f, msg, fcode = far_failure(self, 'server', how == 'exit' and status or 128 + status, strip_pid(err), 2)
      return f, msg, fcode  -- not a tail call: the level counts this frame
    end
    if now_s() >= deadline then
      stop_remote(self, remote_pid(read(err_path)))
      end_local(p)
      return nil, string.format('%s: server start timed out after %s s (stopped there too); raise '
        .. 'opts.timeout_s if the host is slow', self.name, tostring(t)), 'ETIMEDOUT'
    end
    require('qoslab.timer').sleep(0.01)
  end
  local srv = setmetatable({ host = self, proc = p, _port = port, _pid = rpid, out_path = out_path,
                             err_path = err_path, shell_pid = remote_pid(read(err_path)) }, Server)
  srv.change = remember(self, { kind = 'server', pid = rpid, port = port, netns = opts.netns, handle = srv })
  return srv
end

--- The port the server listens on.
-- @treturn integer
function Server:port() return self._port end

--- The server's pid on its host.
-- @treturn integer
function Server:pid() return self._pid end

--- End the server: its ssh channel is closed (EOF on its stdin), it exits;
-- when it does not within 5 s it is stopped with signals. Idempotent.
-- @treturn boolean true when it exited by itself
function Server:close()
  if not self.proc then return true end
  local p = self.proc
  self.proc = nil
  p:close_stdin()
  local how = p:wait(5)
  if not how then
    stop_remote(self.host, self.shell_pid or self._pid)
    end_local(p)
  else
    p:close()
  end
  os.remove(self.out_path)
  os.remove(self.err_path)
  if self.change then forget(self.host, self.change) end
  return how ~= nil
end
Server.__close = Server.close
Server.__gc = Server.close
function Server:__tostring()
  return string.format('qoslab.HostServer (%s port %d%s)', self.host.name, self._port,
    self.proc and '' or ', closed')
end

-- ------------------------------------------------------- netem, shape ----

local function place_args(ctx, ifname, opts, allowed, level)
  level = (level or 1) + 1
  check.cstring(ctx, 'ifname', ifname, nil, level)
  if ifname == nil or ifname == '' then check.fail(ctx, 'ifname', 'an interface name', ifname, level) end
  opts = opts or {}
  check.table(ctx, 'opts', opts, level)
  check.keys(ctx, 'opts', opts, allowed, level + 1)
  check.netns(ctx, 'opts.netns', opts.netns, nil, level)
  if allowed.ingress then check.boolean(ctx, 'opts.ingress', opts.ingress, nil, level) end
  if allowed.parent then check.cstring(ctx, 'opts.parent', opts.parent, nil, level) end
  local a = { ifname }
  if opts.netns then a[#a + 1] = '--netns'; a[#a + 1] = opts.netns end
  if opts.ingress then a[#a + 1] = '--ingress' end
  if opts.parent then a[#a + 1] = '--parent'; a[#a + 1] = opts.parent end
  return a, opts
end

local NETEM_OPTS = { netns = true, ingress = true, parent = true, timeout_s = true }

local function with_json(a, ...)
  local out = { table.unpack(a, 1, 1) }
  for _, w in ipairs { ... } do out[#out + 1] = w end
  for i = 2, #a do out[#out + 1] = a[i] end
  out[#out + 1] = '--json'
  return out
end

-- The far end's document without what only the command line adds (ok, dev).
local function strip_ok(t)
  if t == NONE then return nil end
  if type(t) == 'table' and t.ok == true then t.ok, t.dev = nil, nil end
  return t
end

--- Apply netem on a device of the host (qoslab.netem.apply there).
-- @tparam string ifname
-- @tparam string|table spec tc-netem(8) words ("delay 20ms loss 1%") or a
--   qoslab.netem spec table (checked here first, as qoslab.netem.apply checks it)
-- @tparam[opt] table opts `{netns =, ingress = bool, parent = "MAJ:MIN", timeout_s =}`
-- @treturn table what qoslab.netem.apply returns there
-- @return or nil, message, CODE (e.g. "ENOTSUP" with the far end's advice
--   when its kernel has no sch_netem; "EBUSY" when the device has a netem
--   this handle did not set: another run's, which is not replaced)
-- @raise on a bad spec or opts, here or as the far end raises it
-- @usage assert(b:netem_apply('eth1', 'delay 20ms', {netns = 'lab'}))
function Host:netem_apply(ifname, spec, opts)
  local ctx = 'qoslab.Host:netem_apply'
  check_open(self, ctx)
  local a, o = place_args(ctx, ifname, opts, NETEM_OPTS, 1)
  local words
  if type(spec) == 'table' then
    -- As qoslab.netem.apply checks it, raised at the caller's line.
    local ok, err = pcall(require('qoslab.netem').check, spec, 'qoslab.netem.apply')
    if not ok then error((tostring(err):gsub('^[^\n:]-%.lua:%d+: ', '')), 2) end
    words = { '--spec-json', encode(spec) }
  elseif type(spec) == 'string' and spec:match('%S') and not spec:find('%z') then
    words = {}
    for w in spec:gmatch('%S+') do words[#words + 1] = w end
  else
    check.fail(ctx, 'spec', 'tc-netem words (a string) or a qoslab.netem spec table', spec)
  end
  if not find_change(self, 'netem', ifname, o.netns, o.ingress, o.parent) then
    -- A netem this handle did not set: another run's (or a killed one's)
    -- is not replaced under it.
    local cur = self:netem_get(ifname, { netns = o.netns, ingress = o.ingress, parent = o.parent,
                                         timeout_s = o.timeout_s })
    if cur then
      return nil, string.format('%s: %s already has a netem that this handle did not set: another run may be '
        .. 'using it; clear it first (netem_clear, or `qoslab cleanup --hosts` after a killed run)', self.name,
        ifname), 'EBUSY'
    end
  end
  local args = { 'netem', 'set', table.unpack(with_json(a, table.unpack(words))) }
  local r, err, code = qjson(self, 'netem set', args, { timeout_s = timeout_of(self, ctx, o) }, 2)
  if not r and code == 'ENOTSUP' then
    err = err .. string.format(' (on %s: load the module there, `modprobe sch_netem`; a kernel without it '
      .. 'cannot impair that host: impair this one, or another on the path)', self.ssh or 'this machine')
  end
  if not r then return nil, err, code end
  remember(self, { kind = 'netem', ifname = ifname, netns = o.netns, ingress = o.ingress, parent = o.parent })
  return strip_ok(r)
end

local function netem_read(self, ctx, verb, ifname, opts)
  check_open(self, ctx)
  local a, o = place_args(ctx, ifname, opts, NETEM_OPTS, 2)
  local r, err, code = qjson(self, 'netem ' .. verb, { 'netem', verb, table.unpack(with_json(a)) },
    { timeout_s = timeout_of(self, ctx, o, 2) }, 3)
  if not r then return false, err, code end
  return true, strip_ok(r), o
end

--- The netem on a device of the host (qoslab.netem.get there).
-- @tparam string ifname
-- @tparam[opt] table opts `{netns =, ingress =, parent =, timeout_s =}`
-- @return what qoslab.netem.get returns there (the spec, nil when none),
--   or nil, message, CODE
function Host:netem_get(ifname, opts)
  local ok, r, code = netem_read(self, 'qoslab.Host:netem_get', 'show', ifname, opts)
  if not ok then return nil, r, code end
  return r
end

--- Counters of the netem on a device of the host (qoslab.netem.stats there).
-- @tparam string ifname
-- @tparam[opt] table opts `{netns =, ingress =, parent =, timeout_s =}`
-- @return what qoslab.netem.stats returns there, or nil, message, CODE
function Host:netem_stats(ifname, opts)
  local ok, r, code = netem_read(self, 'qoslab.Host:netem_stats', 'stats', ifname, opts)
  if not ok then return nil, r, code end
  return r
end

--- Remove the netem from a device of the host (qoslab.netem.clear there).
-- @tparam string ifname
-- @tparam[opt] table opts `{netns =, ingress =, parent =, timeout_s =}`
-- @return what qoslab.netem.clear returns there (true: removed, false:
--   none was there), or nil, message, CODE
function Host:netem_clear(ifname, opts)
  local ok, r, o = netem_read(self, 'qoslab.Host:netem_clear', 'clear', ifname, opts)
  if not ok then return nil, r, o end
  local c = find_change(self, 'netem', ifname, o.netns, o.ingress, o.parent)
  if c then forget(self, c) end
  return r.removed == true
end

local SHAPE_OPTS = { netns = true, timeout_s = true }

--- Rate-limit a device's egress on the host (qoslab.shape.apply there).
-- @tparam string ifname
-- @tparam table spec as qoslab.shape.apply's (`{kind = "tbf"|"htb", rate_bps =, ...}`)
-- @tparam[opt] table opts `{netns =, timeout_s =}`
-- @treturn table what qoslab.shape.apply returns there (`{kind =, handle =,
--   netem_parent =, spec =}`)
-- @return or nil, message, CODE ("EBUSY" when the device has a shaper this
--   handle did not set: another run's, which is not replaced)
-- @raise on a bad spec or opts (as qoslab.shape.apply raises)
-- @usage assert(b:shape_apply('eth1', {kind = 'tbf', rate_bps = 50e6}))
function Host:shape_apply(ifname, spec, opts)
  local ctx = 'qoslab.Host:shape_apply'
  check_open(self, ctx)
  local a, o = place_args(ctx, ifname, opts, SHAPE_OPTS, 1)
  check.table(ctx, 'spec', spec)
  -- The binding's own reading of the spec, as shape.apply does first.
  local copts = o.netns and { netns = o.netns } or nil
  check.call(2, check.core().shape_check, ifname, spec, copts)
  if not find_change(self, 'shape', ifname, o.netns) then
    -- A shaper this handle did not set: another run's (or a killed one's)
    -- is not replaced under it.
    local cur = self:shape_get(ifname, { netns = o.netns, timeout_s = o.timeout_s })
    if cur then
      return nil, string.format('%s: %s already has a shaper that this handle did not set (%s %s bit/s): another '
        .. 'run may be using it; clear it first (shape_clear, or `qoslab cleanup --hosts` after a killed run)',
        self.name, ifname, tostring(cur.kind), tostring(cur.rate_bps)), 'EBUSY'
    end
  end
  local args = { 'shape', 'set', table.unpack(with_json(a, '--spec-json', encode(spec))) }
  local r, err, code = qjson(self, 'shape set', args, { timeout_s = timeout_of(self, ctx, o) }, 2)
  if not r then return nil, err, code end
  remember(self, { kind = 'shape', ifname = ifname, netns = o.netns, qdisc_kind = spec.kind })
  return strip_ok(r)
end

--- The rate limit on a device of the host (qoslab.shape.get there).
-- @tparam string ifname
-- @tparam[opt] table opts `{netns =, timeout_s =}`
-- @return what qoslab.shape.get returns there (the spec, nil when none),
--   or nil, message, CODE
function Host:shape_get(ifname, opts)
  local ctx = 'qoslab.Host:shape_get'
  check_open(self, ctx)
  local a, o = place_args(ctx, ifname, opts, SHAPE_OPTS, 1)
  local r, err, code = qjson(self, 'shape show', { 'shape', 'show', table.unpack(with_json(a)) },
    { timeout_s = timeout_of(self, ctx, o) }, 2)
  if not r then return nil, err, code end
  if r == NONE then return nil end
  return r
end

--- Remove the rate limit from a device of the host (qoslab.shape.clear there).
-- @tparam string ifname
-- @tparam[opt] table opts `{netns =, timeout_s =}`
-- @return true (as qoslab.shape.clear), or nil, message, CODE
function Host:shape_clear(ifname, opts)
  local ctx = 'qoslab.Host:shape_clear'
  check_open(self, ctx)
  local a, o = place_args(ctx, ifname, opts, SHAPE_OPTS, 1)
  local r, err, code = qjson(self, 'shape clear', { 'shape', 'clear', table.unpack(with_json(a)) },
    { timeout_s = timeout_of(self, ctx, o) }, 2)
  if not r then return nil, err, code end
  local c = find_change(self, 'shape', ifname, o.netns)
  if c then forget(self, c) end
  return true
end

-- ------------------------------------------------- info, clock, client ----

--- The host's metadata, as a local run records it (qoslab.meta.collect
-- there), with its clocks.
-- @tparam[opt] table opts `{netns = NS, ifnames = {DEV, ...}, timeout_s =}`
-- @treturn table qoslab.meta.collect's table plus `mono_ns` (CLOCK_MONOTONIC
--   there, integer ns) and `realtime_ns` (CLOCK_REALTIME there, integer ns)
-- @return or nil, message, CODE (as `qoslab info` fails there: ENOENT for a
--   missing `netns`, ENODEV for one of `ifnames` the host lacks)
-- @usage print(assert(b:info()).kernel.release)
function Host:info(opts)
  local ctx = 'qoslab.Host:info'
  check_open(self, ctx)
  opts = opts or {}
  check.table(ctx, 'opts', opts)
  check.keys(ctx, 'opts', opts, { netns = true, ifnames = true, timeout_s = true }, 2)
  check.netns(ctx, 'opts.netns', opts.netns)
  local args = { 'info', '--json' }
  if opts.netns then args[#args + 1] = '--netns'; args[#args + 1] = opts.netns end
  if opts.ifnames ~= nil then
    check.table(ctx, 'opts.ifnames', opts.ifnames)
    for i, n in ipairs(opts.ifnames) do
      check.cstring(ctx, 'opts.ifnames[' .. i .. ']', n)
      args[#args + 1] = '--ifname'; args[#args + 1] = n
    end
  end
  local r, raw, code = qjson(self, 'info', args, { timeout_s = timeout_of(self, ctx, opts) }, 2)
  if not r then return nil, raw, code end
  -- Nanosecond clocks exceed a double's 53 bits: read them from the text.
  for _, k in ipairs { 'mono_ns', 'realtime_ns' } do
    local digits = raw:match('"' .. k .. '"%s*:%s*(%d+)')
    if digits then r[k] = math.tointeger(tonumber(digits)) end
  end
  return r
end

--- The offset of the host's CLOCK_MONOTONIC from this machine's, from
-- `samples` echoes of `qoslab clock --echo` there: the sample with the
-- smallest round trip wins (remote = local + offset_ns, within error_ns).
-- @tparam[opt] table opts `{samples = 16 (1..1000), timeout_s =}`
-- @treturn table `{offset_ns = integer, rtt_ns = the best sample's round
--   trip, error_ns = rtt_ns // 2 (the bound of the offset's error), samples = n}`
-- @return or nil, message, CODE
-- @usage local c = assert(b:clock_offset{samples = 16}); local start_there = qoslab.timer.now_ns() + c.offset_ns + 1e9
function Host:clock_offset(opts)
  local ctx = 'qoslab.Host:clock_offset'
  check_open(self, ctx)
  opts = opts or {}
  check.table(ctx, 'opts', opts)
  check.keys(ctx, 'opts', opts, { samples = true, timeout_s = true }, 2)
  local n = check.integer(ctx, 'opts.samples', opts.samples, 1, 1000, 16)
  local t = timeout_of(self, ctx, opts)
  local ok, merr, mcode = ensure_master(self)
  if not ok then return nil, merr, mcode end
  local p, perr, pcode = fs.process(command_argv(self, { 'env', 'QOSLAB_ERRORS=json', self.qoslab, 'clock', '--echo' }),
    { stdin = 'pipe', new_group = true })
  if not p then return nil, self.name .. ': cannot start ssh: ' .. tostring(perr), pcode end
  local best
  local deadline = now_s() + t
  for i = 1, n do
    local t0 = now_ns()
    local sent, serr, scode = p:send(i .. '\n', math.max(0.001, deadline - now_s()))
    local line, lerr, lcode
    if sent then line, lerr, lcode = p:read_line(math.max(0.001, deadline - now_s())) end
    local t1 = now_ns()
    if not line then
      local err = p:take_stderr()
      stop_remote(self, remote_pid(err))
      end_local(p)
      local code = scode or lcode
      if code == 'ETIMEDOUT' then
        return nil, string.format('%s: clock echo timed out after %s s (stopped there too); raise opts.timeout_s',
          self.name, tostring(t)), 'ETIMEDOUT'
      end
      err = strip_pid(err)
      local fl = err:match('.*qoslab%-error: ([^\n]*)')
      local fe = fl and decode(fl)
      if type(fe) == 'table' and type(fe.message) == 'string' then
        return nil, self.name .. ': ' .. fe.message, type(fe.code) == 'string' and fe.code or 'EIO'
      end
      if err:find('not found', 1, true) or err:find('No such file', 1, true) then
        return nil, string.format('%s: qoslab is not installed on %s (looked for %s; set qoslab = path)',
          self.name, self.ssh or 'this machine', self.qoslab), 'ENOENT'
      end
      return nil, string.format('%s: clock echo failed: %s', self.name,
        tostring(err:match('([^\n]+)%s*$') or serr or lerr)), 'EIO'
    end
    local seq, mono = line:match('^(%d+) (%d+)$')
    if tonumber(seq) ~= i then
      end_local(p)
      return nil, string.format('%s: clock echo answered %q to %d', self.name, line, i), 'EPROTO'
    end
    local rtt = t1 - t0
    if not best or rtt < best.rtt_ns then
      best = { rtt_ns = rtt, offset_ns = math.tointeger(tonumber(mono)) - (t0 + rtt // 2) }
    end
  end
  p:close_stdin()
  if not p:wait(5) then
    stop_remote(self, remote_pid(p:take_stderr()))
    end_local(p)
  else
    p:close()
  end
  self.offset_ns = best.offset_ns
  return { offset_ns = best.offset_ns, rtt_ns = best.rtt_ns, error_ns = best.rtt_ns // 2, samples = n }
end

-- qoslab.traffic.run's options -> `qoslab client` flags.
local CLIENT_FLAGS = {
  port = '-p', parallel = '-P', duration_s = '-t', bytes = '-n', packets = '-k',
  omit_s = '-O', interval_s = '-i', window_bytes = '-w', sndbuf_bytes = '--sndbuf',
  rcvbuf_bytes = '--rcvbuf', bitrate_bps = '-b', length_bytes = '-l', congestion = '-C',
  mss_bytes = '-M', tos = '-S', fq_rate_bps = '--fq-rate', bind_address = '-B',
  bind_device = '--bind-dev', netns = '--netns', title = '-T', udp_batch = '--udp-batch',
  udp_drain_s = '--udp-drain', start_at_mono_ns = '--start-at',
}
local CLIENT_SWITCHES = { reverse = '-R', bidir = '--bidir', nodelay = '-N', udp_gso = '--udp-gso',
                          skip_rx_copy = '--skip-rx-copy', zerocopy = '-Z' }

local function client_args(ctx, o)
  if type(o.host) == 'string' and o.host:sub(1, 1) == '-' then
    -- the far end's command line would read it as an option
    check.fail(ctx, 'opts.host', 'a host name or address (not starting with "-")', o.host, 2)
  end
  local args = { 'client', o.host, '--result-json' }
  local keys = {}
  for k in pairs(o) do
    -- host is placed above
    if k ~= 'host' then keys[#keys + 1] = tostring(k) end
  end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v = o[k]
    if k == 'proto' then
      if v == 'udp' then args[#args + 1] = '-u' end
    elseif CLIENT_SWITCHES[k] then
      if v then args[#args + 1] = CLIENT_SWITCHES[k] end
    elseif k == 'connect_timeout_s' then
      args[#args + 1] = '--connect-timeout'; args[#args + 1] = num_word(math.floor(v * 1000 + 0.5))
    elseif k == 'cpu_affinity' or k == 'server_cpu_affinity' then
      if k == 'cpu_affinity' then
        args[#args + 1] = '-A'
        args[#args + 1] = num_word(v) .. (o.server_cpu_affinity and (',' .. num_word(o.server_cpu_affinity)) or '')
      elseif o.cpu_affinity == nil then
        check.fail(ctx, 'opts.server_cpu_affinity', 'cpu_affinity too (qoslab client -A n,m)', v, 2)
      end
    elseif k == 'probe' then
      args[#args + 1] = '--probe'
      args[#args + 1] = num_word(v.interval_ms or 100)
      if v.proto then args[#args + 1] = '--probe-proto'; args[#args + 1] = v.proto end
    elseif CLIENT_FLAGS[k] then
      args[#args + 1] = CLIENT_FLAGS[k]
      args[#args + 1] = type(v) == 'number' and num_word(v) or tostring(v)
    else
      check.fail(ctx, 'opts.' .. k, 'an option the qoslab client command has', v, 2)
    end
  end
  return args
end

local HostTest = {}
HostTest.__index = HostTest
HostTest.__name = 'qoslab.HostTest'

--- Start one qoslab client test on the host (`qoslab client --result-json`
-- there, over its own ssh session) and return at once: several tests, on
-- one host or many, run at the same time this way (a qoslab server takes
-- at most its `max_tests_per_address` tests from one address at once,
-- default 2: more from one host answer EBUSY). One still running when this
-- process is killed runs to its end there (its duration bounds it).
-- @tparam table opts qoslab.traffic.run's options (checked here first as it
--   checks them), plus `start_at_mono_ns` (start when the host's
--   CLOCK_MONOTONIC reaches it: see `clock_offset`) and `timeout_s` (default:
--   the handle's, plus the test's duration and the wait for its start)
-- @treturn qoslab.HostTest a to-be-closed handle: `wait()` → the result
--   table qoslab.traffic.run returns there (with its metatable here:
--   `tostring(res)` is the summary), or nil, message, CODE (the far end's,
--   e.g. "ECONNREFUSED"; "ETIMEDOUT"; "EINTR" when a stop request of
--   qoslab's signal handlers came); `close()` stops the test there and here
--   when it has not been waited for; `.host` (this handle)
-- @return or nil, message, CODE when the test could not be started (no
--   connection, ...)
-- @raise on a bad option
-- @usage local t <close> = assert(a:client_start{host = '10.9.1.2', port = srv:port(), duration_s = 2})
-- local r = assert(t:wait())
function Host:client_start(opts)
  local ctx = 'qoslab.Host:client_start'
  check_open(self, ctx)
  check.table(ctx, 'opts', opts)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  local t = o.timeout_s
  o.timeout_s = nil
  if t ~= nil then check.number(ctx, 'opts.timeout_s', t, 0.001, 1e6) end
  local at = o.start_at_mono_ns
  if at ~= nil and math.type(at) ~= 'integer' then
    check.fail(ctx, 'opts.start_at_mono_ns', 'an integer (ns of the host\'s CLOCK_MONOTONIC)', at)
  end
  -- The local check of the options, without the one only the far end reads.
  local lo = {}
  for k, v in pairs(o) do if k ~= 'start_at_mono_ns' then lo[k] = v end end
  local ok, err = pcall(require('qoslab.traffic').client, lo)
  if not ok then error((tostring(err):gsub('^[^\n:]-%.lua:%d+: ', '')), 2) end
  if t == nil then
    t = self.timeout_s + (tonumber(o.duration_s) or 10) + (tonumber(o.omit_s) or 0)
    -- The wait for the start, when the host's clock offset is known.
    if at and self.offset_ns then t = t + math.max(0, (at - now_ns() - self.offset_ns) / 1e9) end
  end
  local argv = qoslab_argv(self, client_args(ctx, o))
  local job, jerr, jcode = exec_start(self, 'client test', argv, '', t)
  if not job then return nil, jerr, jcode end
  self.tests = self.tests or {}
  local test = setmetatable({ host = self, job = job }, HostTest)
  self.tests[test] = true
  return test
end

--- The test's result, once it ended (see `client_start`); a second call
-- returns the same.
-- @treturn table the result, or nil, message, CODE
function HostTest:wait()
  if self.answer then return table.unpack(self.answer, 1, self.answer.n) end
  local h, job = self.host, self.job
  local r, err, code = exec_finish(h, job)
  if r then
    r, err, code = qdone(h, job.what, r, 2)
    if r then r, err, code = json_of(h, job.what, r) end
    if r then
      -- the result alone: json_of's second value is the raw text
      setmetatable(r, require('qoslab.traffic.result').Result)
      err, code = nil, nil
    end
  end
  h.tests[self] = nil
  self.answer = table.pack(r, err, code)
  if r then return r end
  return nil, err, code
end

--- Stop the test when it has not been waited for (there: its process;
-- here: its ssh). Idempotent.
function HostTest:close()
  if self.answer then return end
  exec_abort(self.host, self.job)
  self.host.tests[self] = nil
  self.answer = table.pack(nil, self.host.name .. ': client test stopped before its end', 'ECANCELED')
end
HostTest.__close = HostTest.close
HostTest.__gc = HostTest.close
function HostTest:__tostring()
  return string.format('qoslab.HostTest (%s%s)', self.host.name, self.answer and ', ended' or '')
end

--- Run one qoslab client test on the host and return its result:
-- `client_start(opts)` and its `wait()`.
-- @tparam table opts as `client_start`'s
-- @treturn table the result table qoslab.traffic.run returns there
-- @return or nil, message, CODE (the far end's, e.g. "ECONNREFUSED")
-- @raise on a bad option
-- @usage local r = assert(a:client{host = '10.9.1.2', port = srv:port(), duration_s = 2})
function Host:client(opts)
  local ok, t, err, code = pcall(Host.client_start, self, opts)
  if not ok then
    -- a bad option, named as this method's
    error((tostring(t):gsub('^[^\n:]-%.lua:%d+: ', ''):gsub('Host:client_start', 'Host:client')), 2)
  end
  if not t then return nil, err, code end
  local r, msg, rcode = t:wait()
  return r, msg, rcode
end

-- ---------------------------------------------------------- cleanup ----

--- Undo everything this handle changed on its host, newest first: netem
-- and shapers it applied (and did not clear), servers it started; client
-- tests it started and nobody waited for are stopped first.
-- @treturn table list of `{kind = "netem"|"shape"|"server", ifname =, netns =,
--   removed = boolean, error = message|nil}`
-- @usage b:cleanup()
function Host:cleanup()
  local report = {}
  -- client tests still running (client_start, not waited for) stop first
  for t in pairs(self.tests or {}) do t:close() end
  for i = #self.changes, 1, -1 do
    local c = self.changes[i]
    local r = { kind = c.kind, ifname = c.ifname, netns = c.netns, removed = false }
    if c.kind == 'server' then
      r.removed = c.handle and c.handle:close() ~= nil or false
      if c.handle == nil then forget(self, c) end
    else
      local opts = { netns = c.netns, ingress = c.ingress, parent = c.parent }
      local ok, err
      if c.kind == 'netem' then ok, err = self:netem_clear(c.ifname, opts)
      else ok, err = self:shape_clear(c.ifname, { netns = c.netns }) end
      -- A failure keeps the record: `qoslab cleanup --hosts` can try again
      -- once this process has ended.
      r.removed, r.error = ok == true, err
    end
    report[#report + 1] = r
  end
  return report
end

--- Run `cleanup()`, then stop the connection (`ssh -O exit`) and remove its
-- private directory. Idempotent; also `__close` and `__gc`.
-- @treturn table what `cleanup()` returned (empty when closed already)
function Host:close()
  if self.closed then return {} end
  local report = self:cleanup()
  self.closed = true
  if self.ssh and M._master_socket(self.dir) then
    local argv = ssh_base(self)
    for _, w in ipairs { '-S', self.control_path, '-O', 'exit', '--', self.ssh } do argv[#argv + 1] = w end
    local p = fs.process(argv)
    if p then p:communicate(nil, 5); p:close() end
  end
  if self.dir then
    for _, n in ipairs(fs.list(self.dir) or {}) do os.remove(self.dir .. '/' .. n) end
    os.remove(self.dir)
  end
  return report
end
Host.__close = Host.close
Host.__gc = function(self) if not self.closed then pcall(Host.close, self) end end
function Host:__tostring()
  return string.format('qoslab.Host (%s%s)', self.name, self.closed and ', closed' or '')
end

--- Remove, over ssh, what dead processes' handles changed on hosts and did
-- not undo (the ledger beside qoslab.state's files): netem and shapers are
-- cleared when the qdisc there is still of the kind applied, servers still
-- running are stopped, the dead process's ssh master is told to exit.
-- @tparam[opt] table opts `{hosts = {"user@host", ...} (only these; a bare "host" takes
--   every user's there; default all)}`
-- @treturn table list of `{host = ssh, kind =, ifname =, netns =, pid =,
--   removed = boolean, skipped = why|nil, error = message|nil}`
-- @usage for _, r in ipairs(qoslab.host.cleanup_dead()) do print(r.host, r.kind, r.removed) end
-- @function cleanup_dead
M.cleanup_dead = ledger.cleanup_dead

return M
