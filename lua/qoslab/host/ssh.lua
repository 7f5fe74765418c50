--- (internal) qoslab.host's transport: the ssh command lines, the master
-- connection, remote commands with their pid, timeouts and stopping, and the
-- far end's qoslab calls with its failures mapped to `nil, message, CODE`.
-- qoslab.host documents the behaviour; this module is not public.
-- @module qoslab.host.ssh
local cjson_mod = require 'cjson'
local lfs = require 'lfs'
local fs = require 'qoslab.fs'

local cjson = cjson_mod.new()
cjson.encode_sparse_array(false)

local M = {}

-- The first stderr line of every remote command: the remote shell's pid
-- (the command is exec'd in its place), to stop it on a timeout.
local PID_TAG = 'qoslab-host-pid '
local PID_PAT = '^' .. PID_TAG:gsub('%-', '%%-') .. '(%d+)\n'
local WRAP = 'echo "' .. PID_TAG .. '$$" >&2; exec "$@"'
local CONTROL_PERSIST_S = 120

local function now_s() return require('qoslab.timer').now() end

-- qoslab.host.shell_quote (documented there).
function M.shell_quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- On a host over ssh the command first becomes the leader of a process
-- group of its own (setsid; sshd's login shell leads the one it is in), so
-- that stopping it by its pid's group stops what it started too; where
-- setsid cannot wait for it (busybox), as WRAP.
local WRAP_SSH = 'if setsid -w true >/dev/null 2>&1; then exec setsid -w sh -c '
  .. M.shell_quote(WRAP) .. ' qoslab-host "$@"; fi; ' .. WRAP

-- JSON numbers come back as floats from cjson: whole ones as integers
-- (counters), and cjson.null as no value, as the local calls give them.
local function plain(v)
  if type(v) == 'number' then return math.tointeger(v) or v end
  if v == cjson_mod.null then return nil end
  if type(v) ~= 'table' then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = plain(x) end
  return out
end

local function decode(text)
  local ok, v = pcall(cjson.decode, text)
  if not ok then return nil, v end
  return plain(v)
end

-- --------------------------------------------------------- transport ----

local function ssh_base(self)
  local a = { 'ssh', '-o', 'BatchMode=yes', '-o', 'ConnectTimeout=' .. self.connect_timeout_s,
              '-o', 'ServerAliveInterval=' .. math.max(1, self.connect_timeout_s // 2),
              '-o', 'ServerAliveCountMax=3' }
  if self.port then a[#a + 1] = '-p'; a[#a + 1] = tostring(self.port) end
  if self.identity then
    a[#a + 1] = '-i'; a[#a + 1] = self.identity
    a[#a + 1] = '-o'; a[#a + 1] = 'IdentitiesOnly=yes'
  end
  for _, o in ipairs(self.options) do a[#a + 1] = '-o'; a[#a + 1] = o end
  return a
end

-- What an ssh that ended with 255 before the remote command ran says:
-- message, code.
local function ssh_failure(self, stderr)
  local text = (stderr or ''):gsub('%s+$', '')
  local last = text:match('([^\n]*)$') or ''
  local function msg(what, advice)
    return string.format('%s: %s (ssh: %s); %s', self.name, what, last ~= '' and last or 'no message', advice)
  end
  if text:find('Permission denied', 1, true) then
    return msg('ssh to ' .. self.ssh .. ' was refused',
      'check the user in ssh = "user@host", the key (identity = path) and that its public half is in the '
      .. "user's authorized_keys there"), 'EACCES'
  end
  if text:find('Host key verification failed', 1, true) or text:find('REMOTE HOST IDENTIFICATION', 1, true) then
    return msg('the host key of ' .. self.ssh .. ' is not the known one',
      'add it to known_hosts (ssh once by hand) or set options = {"UserKnownHostsFile=..."}'), 'EACCES'
  end
  if text:find('Connection refused', 1, true) then
    return msg('nothing accepts ssh connections at ' .. self.ssh .. (self.port and (' port ' .. self.port) or ''),
      'is sshd running there, on that port (port = N)?'), 'ECONNREFUSED'
  end
  if text:find('No route to host', 1, true) then
    return msg(self.ssh .. ' is unreachable', 'check the address and the route to it'), 'EHOSTUNREACH'
  end
  if text:find('Network is unreachable', 1, true) then
    return msg(self.ssh .. ' is unreachable', 'this machine has no route to that network'), 'ENETUNREACH'
  end
  if text:find('[Tt]imed out') then
    return msg(string.format('no answer from %s within %d s', self.ssh, self.connect_timeout_s),
      'check the address, that the host is up and no firewall drops ssh; raise connect_timeout_s for a slow path'),
      'ETIMEDOUT'
  end
  if text:find('Could not resolve hostname', 1, true) then
    return msg('cannot resolve ' .. self.ssh, 'check the host name'), 'EHOSTUNREACH'
  end
  return msg('ssh to ' .. self.ssh .. ' failed', 'run the same ssh by hand to see why'), 'EIO'
end

-- The master's socket in a handle's directory (ssh names it by %C), or nil.
function M._master_socket(dir)
  for _, n in ipairs(fs.list(dir) or {}) do
    if lfs.symlinkattributes(dir .. '/' .. n, 'mode') == 'socket' then return dir .. '/' .. n end
  end
  return nil
end

-- Start (again) the master connection when its socket is not there.
local function ensure_master(self)
  if not self.ssh then return true end
  if M._master_socket(self.dir) then return true end
  local argv = ssh_base(self)
  for _, w in ipairs { '-M', '-N', '-o', 'ControlPath=' .. self.control_path,
                       '-o', 'ControlPersist=' .. CONTROL_PERSIST_S, '--', self.ssh } do
    argv[#argv + 1] = w
  end
  local p, perr, pcode = fs.process(argv, { new_group = true })
  if not p then return nil, self.name .. ': cannot start ssh: ' .. tostring(perr), pcode end
  -- With ControlPersist the master goes to the background once logged in
  -- and this ssh exits 0; a failure exits 255 with ssh's reason.
  local _, err = p:communicate(nil, self.connect_timeout_s + 5)
  local how, status = p:wait(0.5)
  if not how then
    p:close()
    return nil, string.format('%s: no answer from %s within %d s; check the address, that the host is up '
      .. 'and no firewall drops ssh; raise connect_timeout_s for a slow path', self.name, self.ssh,
      self.connect_timeout_s), 'ETIMEDOUT'
  end
  p:close()
  if how == 'exit' and status == 0 then return true end
  return nil, ssh_failure(self, err or '')
end

-- The local argv that runs argv on the host (quoted for its shell).
local function command_argv(self, argv)
  if not self.ssh then
    return { 'sh', '-c', WRAP, 'qoslab-host', table.unpack(argv) }
  end
  local a = ssh_base(self)
  for _, w in ipairs { '-S', self.control_path, '--', self.ssh, 'sh', '-c', M.shell_quote(WRAP_SSH), 'qoslab-host' } do
    a[#a + 1] = w
  end
  for _, w in ipairs(argv) do a[#a + 1] = M.shell_quote(w) end
  return a
end

local function remote_pid(stderr)
  return tonumber((stderr or ''):match(PID_PAT))
end

local function strip_pid(stderr)
  return ((stderr or ''):gsub(PID_PAT, '', 1))
end

-- Stop a remote process (and its group when it leads one): TERM, then KILL
-- after a second.
local function stop_remote(self, pid)
  -- Here the process is our own child, ended by end_local (a signal
  -- loop like the one below would see it as a zombie until reaped).
  if not pid or not self.ssh then return end
  local script = 'kill -TERM -"$1" 2>/dev/null || kill -TERM "$1" 2>/dev/null; i=0; '
    .. 'while kill -0 "$1" 2>/dev/null && [ $i -lt 10 ]; do sleep 0.1; i=$((i+1)); done; '
    .. 'kill -KILL -"$1" 2>/dev/null; kill -KILL "$1" 2>/dev/null; true'
  local argv
  if self.ssh then
    argv = ssh_base(self)
    for _, w in ipairs { '-S', self.control_path, '--', self.ssh, 'sh', '-c', M.shell_quote(script), 'sh',
                         tostring(pid) } do
      argv[#argv + 1] = w
    end
  else
    argv = { 'sh', '-c', script, 'sh', tostring(pid) }
  end
  local p = fs.process(argv)
  if p then
    p:communicate(nil, self.connect_timeout_s + 3)
    p:close()
  end
end

-- End a local process we started: TERM, then KILL.
local function end_local(p)
  p:kill('TERM')
  if not p:wait(1) then p:kill('KILL'); p:wait(1) end
  p:close()
end

-- Start argv on the host; a job for exec_finish / exec_abort, or nil,
-- message, code. stdin (a string, may be empty) is written and closed.
local function exec_start(self, what, argv, stdin, timeout_s)
  local ok, merr, mcode = ensure_master(self)
  if not ok then return nil, merr, mcode end
  local p, perr, pcode = fs.process(command_argv(self, argv), { stdin = 'pipe', new_group = true })
  if not p then return nil, self.name .. ': cannot start ssh: ' .. tostring(perr), pcode end
  local job = { p = p, what = what, timeout_s = timeout_s, deadline = timeout_s and now_s() + timeout_s }
  if stdin and stdin ~= '' then
    local sok, serr, scode = p:send(stdin, timeout_s)
    if not sok then
      end_local(p)
      return nil, string.format('%s: %s: %s', self.name, what, tostring(serr)), scode
    end
  end
  p:close_stdin()
  return job
end

-- Stop a started job: the remote process (its pid is the first stderr
-- line; waited for up to connect_timeout_s when it has not come yet) and
-- the local ssh. Returns stdout and stderr read so far.
local function exec_abort(self, job)
  local p = job.p
  if not p then return job.out or '', job.err or '' end
  job.p = nil
  local out, err = {}, {}
  local limit = now_s() + (self.ssh and self.connect_timeout_s or 1)
  repeat
    local o, e, _, o2, e2 = p:communicate(nil, 0.05)
    if o then out[#out + 1], err[#err + 1] = o, e
    else out[#out + 1], err[#err + 1] = o2 or '', e2 or '' end
    local pid = remote_pid(table.concat(err))
    if o or pid then
      stop_remote(self, pid)
      break
    end
  until now_s() >= limit
  end_local(p)
  return table.concat(out), strip_pid(table.concat(err))
end

-- Read a started job to its end: {status =, stdout =, stderr =} (status:
-- the exit status, or 128 + the signal), or nil, message, code.
local function exec_finish(self, job)
  local p, what, timeout_s = job.p, job.what, job.timeout_s
  local left = job.deadline and math.max(0, job.deadline - now_s())
  local out, err, code, out_so_far, err_so_far = p:communicate(nil, left)
  if not out then
    job.out, job.err = out_so_far, err_so_far
    stop_remote(self, remote_pid(err_so_far))
    job.p = nil
    end_local(p)
    if code == 'ETIMEDOUT' then
      return nil, string.format('%s: %s timed out after %s s (stopped there too); raise opts.timeout_s '
        .. '(or timeout_s of qoslab.host) if it needs longer', self.name, what, tostring(timeout_s)), 'ETIMEDOUT',
        out_so_far, strip_pid(err_so_far)
    end
    return nil, string.format('%s: %s: %s', self.name, what, tostring(err)), code
  end
  job.p = nil
  local how, status = p:wait(self.connect_timeout_s + 5)
  if not how then
    end_local(p)
    return nil, string.format('%s: %s: ssh did not end after its output did', self.name, what), 'ETIMEDOUT'
  end
  p:close()
  local started = remote_pid(err) ~= nil
  if self.ssh and how == 'exit' and status == 255 and not started then
    return nil, ssh_failure(self, err)
  end
  return { status = how == 'exit' and status or 128 + status, stdout = out, stderr = strip_pid(err) }
end

-- Run argv on the host: exec_finish's answer, or nil, message, code.
local function exec(self, what, argv, stdin, timeout_s)
  local job, err, code = exec_start(self, what, argv, stdin, timeout_s)
  if not job then return nil, err, code end
  local r, msg, mcode, out, rest = exec_finish(self, job)
  return r, msg, mcode, out, rest
end

-- Why the far end's qoslab failed (exit status, its stderr): nil, message,
-- code; a bad-input error naming a field (exit 2, contract's error line
-- with a field) is raised at `level` instead, as the local call raises it.
local function far_failure(self, what, status, stderr, level)
  local line = stderr:match('.*qoslab%-error: ([^\n]*)')
  local fe = line and decode(line)
  if type(fe) == 'table' and type(fe.message) == 'string' then
    if status == 2 and type(fe.field) == 'string' then
      error(string.format('%s: %s', self.name, fe.message), (level or 1) + 1)
    end
    local msg = string.format('%s: %s', self.name, fe.message:gsub('\n', '; '))
    if status == 2 and (fe.message:find('unknown command', 1, true) or fe.message:find('unknown option', 1, true)) then
      msg = msg .. ' (the qoslab there is older than this one: update it)'
    end
    return nil, msg, type(fe.code) == 'string' and fe.code or 'EIO'
  end
  if status == 127 then
    return nil, string.format('%s: qoslab is not installed on %s (looked for %s; set qoslab = path, '
      .. 'or qoslab run --remote-qoslab PATH)',
      self.name, self.ssh or 'this machine', self.qoslab), 'ENOENT'
  end
  local tail = stderr:gsub('%s+$', ''):match('([^\n]*)$')
  return nil, string.format('%s: %s failed (exit %d): %s', self.name, what, status,
    tail ~= '' and tail or 'no message'), 'EIO'
end

-- The argv of `qoslab ARGS...` on the host, its errors as JSON lines.
local function qoslab_argv(self, args)
  local argv = { 'env', 'QOSLAB_ERRORS=json', self.qoslab }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  return argv
end

-- What exec's answer r says of a qoslab command: r when it exited 0; else
-- nil, message, code, or raises the far end's field error.
local function qdone(self, what, r, level)
  if r.status == 0 then return r end
  local f, msg, fcode = far_failure(self, what, r.status, r.stderr, (level or 1) + 1)
  return f, msg, fcode  -- not a tail call: the level counts this frame
end

-- Run `qoslab ARGS...` on the host. Returns the result of exec when it
-- exited 0; else nil, message, code, or raises the far end's field error.
local function qcall(self, what, args, opts, level)
  local r, err, code = exec(self, what, qoslab_argv(self, args), opts and opts.stdin,
    opts and opts.timeout_s or self.timeout_s)
  if not r then return nil, err, code end
  local f, msg, fcode = qdone(self, what, r, (level or 1) + 1)
  return f, msg, fcode
end

-- What qjson returns for a JSON null (a get that found nothing).
local NONE = setmetatable({}, { __name = 'none' })

-- The one JSON document of a qoslab command's stdout: the decoded table
-- (NONE for null), or nil, message, "EPROTO".
local function json_of(self, what, r)
  if r.stdout:match('^%s*null%s*$') then return NONE, r.stdout end
  local v, jerr = decode(r.stdout)
  if type(v) ~= 'table' then
    return nil, string.format('%s: %s: the far end printed no JSON document (%s); is its qoslab older '
      .. 'than this one?', self.name, what, tostring(jerr or 'not an object')), 'EPROTO'
  end
  return v, r.stdout
end

-- qcall whose stdout is one JSON document: json_of's answer.
local function qjson(self, what, args, opts, level)
  local r, err, code = qcall(self, what, args, opts, (level or 1) + 1)
  if not r then return nil, err, code end
  return json_of(self, what, r)
end

-- The pieces qoslab.host and its ledger use.
M.PID_TAG = PID_TAG
M.PID_PAT = PID_PAT
M.WRAP = WRAP
M.CONTROL_PERSIST_S = CONTROL_PERSIST_S
M.now_s = now_s
M.plain = plain
M.decode = decode
M.ssh_base = ssh_base
M.ssh_failure = ssh_failure
M.ensure_master = ensure_master
M.command_argv = command_argv
M.remote_pid = remote_pid
M.strip_pid = strip_pid
M.stop_remote = stop_remote
M.end_local = end_local
M.exec_start = exec_start
M.exec_abort = exec_abort
M.exec_finish = exec_finish
M.exec = exec
M.far_failure = far_failure
M.qoslab_argv = qoslab_argv
M.qdone = qdone
M.qcall = qcall
M.NONE = NONE
M.json_of = json_of
M.qjson = qjson

return M
