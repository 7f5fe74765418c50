--- File system and process helpers of the Lua layers: LuaFileSystem for
-- directories and file kinds, qoslab.core for what LuaFileSystem lacks
-- (fsync, realpath, uname, kill, running a program by argv, with pipes
-- and timeouts).
--
-- No function here starts a shell, so a path or name is never parsed as
-- shell syntax, and a Ctrl-C reaches this process (system(3) would ignore
-- SIGINT while it waits). Paths with a NUL byte are refused: the C calls
-- would see a shorter path.
-- @module qoslab.fs
local lfs = require 'lfs'

local M = {}

local core_mod
local function core()
  if core_mod == nil then
    local ok, c = pcall(require, 'qoslab.core')
    core_mod = ok and type(c) == 'table' and c or false
  end
  return core_mod or nil
end

local function usable(p)
  return type(p) == 'string' and p ~= '' and not p:find('\0', 1, true)
end

-- errno numbers (Linux) and strerror texts -> the stable codes of qoslab.
local ERRNO = {
  [1] = 'EPERM', [2] = 'ENOENT', [5] = 'EIO', [6] = 'ENXIO', [13] = 'EACCES',
  [16] = 'EBUSY', [17] = 'EEXIST', [19] = 'ENODEV', [20] = 'ENOTDIR', [21] = 'EISDIR',
  [22] = 'EINVAL', [24] = 'EMFILE', [27] = 'EFBIG', [28] = 'ENOSPC', [30] = 'EROFS',
  [36] = 'ENAMETOOLONG', [40] = 'ELOOP', [95] = 'ENOTSUP', [122] = 'EDQUOT',
}
local STRERROR = {
  ['Operation not permitted'] = 'EPERM', ['No such file or directory'] = 'ENOENT',
  ['Input/output error'] = 'EIO', ['Permission denied'] = 'EACCES', ['File exists'] = 'EEXIST',
  ['Not a directory'] = 'ENOTDIR', ['Is a directory'] = 'EISDIR', ['Invalid argument'] = 'EINVAL',
  ['No space left on device'] = 'ENOSPC', ['Read-only file system'] = 'EROFS',
  ['File name too long'] = 'ENAMETOOLONG', ['Too many levels of symbolic links'] = 'ELOOP',
  ['Disk quota exceeded'] = 'EDQUOT', ['File too large'] = 'EFBIG',
}

--- The stable code for an errno, as io.open and LuaFileSystem return it
-- (`nil, message, errno`).
-- @tparam integer|nil errno
-- @tparam[opt] string message the message, read when errno is missing
--   (its strerror(3) text, at its end)
-- @treturn string "ENOENT", "ENOTDIR", "EROFS", "ENAMETOOLONG", ... or "EIO"
--   when neither is known
-- @usage local f, err, errno = io.open(p, 'w'); if not f then return nil, err, fs.errno_code(errno, err) end
function M.errno_code(errno, message)
  local c = math.type(errno) and ERRNO[errno]
  if c then return c end
  if type(message) == 'string' then
    for text, code in pairs(STRERROR) do
      if message:sub(-#text) == text then return code end
    end
  end
  return 'EIO'
end

--- Write a whole file (created or truncated).
-- @tparam string path
-- @tparam string text
-- @return true, or nil, "cannot write PATH: REASON", CODE (from the errno:
--   "ENOENT", "ENOTDIR", "EACCES", "EROFS", "ENAMETOOLONG", "ENOSPC", ...)
-- @usage assert(fs.write_file('out/x.gp', script))
function M.write_file(path, text)
  if not usable(path) then
    return nil, 'cannot write ' .. string.format('%q', tostring(path)) .. ': not a usable path', 'EINVAL'
  end
  local f, err, errno = io.open(path, 'w')
  if not f then
    local reason = tostring(err)
    if reason:sub(1, #path + 2) == path .. ': ' then reason = reason:sub(#path + 3) end
    return nil, 'cannot write ' .. path .. ': ' .. reason, M.errno_code(errno, err)
  end
  local ok, werr, werrno = f:write(text)
  local cok, cerr, cerrno = f:close()
  if not ok or not cok then
    return nil, 'cannot write ' .. path .. ': ' .. tostring(werr or cerr),
      M.errno_code(werrno or cerrno, werr or cerr)
  end
  return true
end

--- Replace a whole file at once: the text goes to `PATH.tmp` (a symbolic
-- link there is removed first, not written through), which is then renamed
-- over path, so a reader sees the old file or the new one, never half.
-- @tparam string path
-- @tparam string text
-- @return true, or nil, message, CODE as `write_file` ("EIO" when the
--   rename fails)
-- @usage assert(fs.replace_file(dir .. '/index.html', page))
function M.replace_file(path, text)
  local tmp = tostring(path) .. '.tmp'
  if M.lkind(tmp) == 'link' then os.remove(tmp) end
  local ok, err, code = M.write_file(tmp, text)
  if not ok then return nil, err, code end
  local rok, rerr = os.rename(tmp, path)
  if not rok then
    os.remove(tmp)
    return nil, 'cannot write ' .. path .. ': ' .. tostring(rerr), 'EIO'
  end
  return true
end

--- Kind of what a path names, following symbolic links.
-- @tparam string path
-- @treturn string|nil "file", "directory", "link", "socket", "named pipe",
--   "char device", "block device" or "other"; nil when there is nothing
-- @usage if fs.kind('results') == 'directory' then ... end
function M.kind(path)
  if not usable(path) then return nil end
  return (lfs.attributes(path, 'mode'))
end

--- Kind of what a path names itself, not following a symbolic link
-- (lstat(2)): "link" for a link, whatever it points at.
-- @tparam string path
-- @treturn string|nil as `kind`, or nil when there is nothing
-- @usage if fs.lkind(dir .. '/x.png') == 'file' then ... end
function M.lkind(path)
  if not usable(path) then return nil end
  return (lfs.symlinkattributes(path, 'mode'))
end

--- Whether path is a directory (like `test -d`).
-- @tparam string path
-- @treturn boolean
function M.is_dir(path) return M.kind(path) == 'directory' end

--- Whether path is a regular file (like `test -f`).
-- @tparam string path
-- @treturn boolean
function M.is_file(path) return M.kind(path) == 'file' end

--- Create a directory and its parents (like `mkdir -p`).
-- @tparam string dir
-- @treturn boolean|nil true if it was made now, false if it was there,
--   or nil, message, CODE ("ENOTDIR", "EACCES", "EINVAL" for an empty path
--   or one with a NUL byte, ...)
-- @usage assert(fs.mkdir_p('results/run-1') ~= nil)
function M.mkdir_p(dir)
  if not usable(dir) then
    return nil, 'not a usable directory name: ' .. string.format('%q', tostring(dir)), 'EINVAL'
  end
  if M.is_dir(dir) then return false end
  local made = false
  local prefix = dir:sub(1, 1) == '/' and '/' or ''
  for part in dir:gmatch('[^/]+') do
    prefix = prefix .. part
    local kind, aerr, aerrno = lfs.attributes(prefix, 'mode')
    if kind == nil and aerrno ~= nil and aerrno ~= 2 then
      -- ENAMETOOLONG, EACCES (a folder on the way not searchable), ELOOP, ...
      return nil, string.format('cannot create %s: %s', dir, tostring(aerr):gsub('^.*: ', '')),
        M.errno_code(aerrno, aerr)
    end
    if kind == nil then
      local ok, err, errno = lfs.mkdir(prefix)
      -- EEXIST: made meanwhile by someone else (another process of a sweep).
      if not ok and lfs.attributes(prefix, 'mode') ~= 'directory' then
        local reason = tostring(err)
        if reason:sub(1, #prefix + 2) == prefix .. ': ' then reason = reason:sub(#prefix + 3) end
        return nil, string.format('cannot create %s: %s', prefix, reason), M.errno_code(errno, err)
      end
      made = true
    elseif kind ~= 'directory' then
      return nil, string.format('cannot create %s: %s is a %s', dir, prefix, kind), 'ENOTDIR'
    end
    prefix = prefix .. '/'
  end
  return made
end

--- Names in a directory, without "." and "..", sorted.
-- @tparam string dir
-- @treturn table|nil list of names, or nil, message, "ENOENT" when dir
--   cannot be read
function M.list(dir)
  if not usable(dir) or not M.is_dir(dir) then
    return nil, 'not a readable directory: ' .. tostring(dir), 'ENOENT'
  end
  local ok, iter, obj = pcall(lfs.dir, dir)
  if not ok then return nil, tostring(iter), 'EACCES' end
  local out = {}
  for name in iter, obj do
    if name ~= '.' and name ~= '..' then out[#out + 1] = name end
  end
  table.sort(out)
  return out
end

--- Remove a directory if it is empty (like `rmdir`).
-- @tparam string dir
-- @treturn boolean true if removed
function M.rmdir_if_empty(dir)
  local names = M.list(dir)
  if not names or #names > 0 then return false end
  return lfs.rmdir(dir) == true
end

--- Flush a written file to stable storage (fsync(2)).
-- @tparam string path
-- @return true, or nil, message, CODE (also "ENOTSUP" when qoslab.core
--   cannot be loaded)
function M.fsync(path)
  local c = core()
  if not c then return nil, 'qoslab.core is not loadable: cannot fsync ' .. tostring(path), 'ENOTSUP' end
  if not usable(path) then return nil, 'not a usable path: ' .. string.format('%q', tostring(path)), 'EINVAL' end
  return c.fsync(path)
end

--- The absolute path without symbolic links (like `realpath`, `pwd -P`).
-- @tparam string path
-- @treturn string|nil the path, or nil, message, CODE ("EINVAL" for no
--   non-empty string without NUL, "ENOENT", "ENOTDIR", "EACCES", "ELOOP",
--   "ENAMETOOLONG" as realpath(3) fails)
function M.realpath(path)
  if not usable(path) then return nil, 'not a usable path: ' .. string.format('%q', tostring(path)), 'EINVAL' end
  local c = core()
  if c then return c.realpath(path) end
  -- Without the C module: a directory can still be resolved by entering it.
  local here = lfs.currentdir()
  if not here or not M.is_dir(path) or not lfs.chdir(path) then
    return nil, 'cannot resolve ' .. path, 'ENOENT'
  end
  local out = lfs.currentdir()
  lfs.chdir(here)
  return out
end

--- The working directory (getcwd(3): no symbolic links, like `pwd -P`).
-- @treturn string
function M.cwd() return lfs.currentdir() end

--- uname(2) as `uname -a` prints it: "Linux HOST RELEASE VERSION MACHINE".
-- @treturn string "" when qoslab.core cannot be loaded
function M.uname_a()
  local c = core()
  if not c then return '' end
  local u = c.uname()
  return table.concat({ u.sysname, u.nodename, u.release, u.version, u.machine }, ' ')
end

--- Send a signal to a process (kill(2)).
-- @tparam integer pid
-- @tparam string|integer sig "TERM", "INT", "KILL", "HUP", or 0 (existence check)
-- @return true, or nil, message, CODE ("ESRCH", "EPERM")
function M.kill(pid, sig)
  local c = core()
  if not c then return nil, 'qoslab.core is not loadable: cannot signal ' .. tostring(pid), 'ENOTSUP' end
  return c.kill(pid, sig)
end

--- Run a program by argv (no shell) and wait for it.
-- @tparam table argv program (looked up in PATH unless it has a "/") and arguments
-- @tparam[opt] table opts `{cwd = DIR, output = FILE}`: the child's working
--   directory; where its stdout and stderr go (truncated; default: ours)
-- @treturn string|nil "exit" or "signal", then the status or signal number;
--   or nil, message, CODE ("ENOENT" for no such program, "EINTR" when this
--   process was interrupted: the child got SIGTERM)
-- @usage local how, n = fs.run({'gnuplot', 'plot.gp'}, {cwd = 'results'})
function M.run(argv, opts)
  local c = core()
  if not c then return nil, 'qoslab.core is not loadable: cannot run ' .. tostring(argv[1]), 'ENOTSUP' end
  return c.spawn(argv, opts)
end

--- Start a program by argv (no shell) and read its stdout as it comes.
-- @tparam table argv program (looked up in PATH unless it has a "/") and arguments
-- @treturn file|nil a Lua file over the child's stdout (its stdin and stderr
--   are this process's); `close()` waits for the child and returns as
--   io.popen's does (`true|nil, "exit"|"signal", n`)
-- @treturn integer|string the child's pid, or the message (then a CODE follows)
-- @usage local f, pid = fs.popen({'dmesg'}); for l in f:lines() do ... end; f:close()
function M.popen(argv)
  local c = core()
  if not c then return nil, 'qoslab.core is not loadable: cannot run ' .. tostring(argv[1]), 'ENOTSUP' end
  return c.spawn_reader(argv)
end

--- Start a program by argv (no shell) with pipes to it, every read and
-- write bounded by a timeout (poll(2) on CLOCK_MONOTONIC): for driving a
-- program that may hang, such as an ssh client whose peer went away.
-- @tparam table argv program (looked up in PATH unless it has a "/") and
--   1..255 arguments, strings without NUL bytes
-- @tparam[opt] table opts `{stdin = "null"|"pipe" (default "null"),
--   stdout = "pipe"|PATH (default "pipe"), stderr = "pipe"|PATH (default
--   "pipe"; a PATH is created or truncated, mode 0600), cwd = DIR,
--   new_group = boolean (the child leads its own process group, so a Ctrl-C
--   at the terminal reaches only this process, which then stops the child
--   itself; default false)}`
-- @treturn userdata|nil a `qoslab.Process`, or nil, message, CODE ("ENOENT"
--   for no such program, "EACCES", ...). Its methods (timeouts in seconds,
--   nil: none): `pid()`; `send(data, timeout_s)` → true; `close_stdin()`;
--   `communicate(input|nil, timeout_s)` writes input, closes stdin, reads
--   both outputs to their end → stdout, stderr (or nil, message,
--   "ETIMEDOUT"|"EINTR", stdout so far, stderr so far);
--   `read_line(timeout_s)` → the next stdout line without "\n" (or nil,
--   message, "ETIMEDOUT"|"EINTR"|"EOF"); `take_stderr()` → stderr read so
--   far; `wait(timeout_s)` → "exit"|"signal", n (or nil, message,
--   "ETIMEDOUT"); `kill("TERM"|"INT"|"KILL"|"HUP")`; `close()` (also `__gc`,
--   `__close`): closes the pipes, a child still running gets SIGKILL and is
--   reaped. Failures return nil, message, CODE; an output above 256 MiB is
--   "EFBIG".
-- @raise on a bad argv or opts (`"qoslab.core.process: opts.stdin: ..."`)
-- @usage local p = assert(fs.process({'ssh', host, 'uptime'}))
-- local out, err = p:communicate(nil, 10); local how, n = p:wait(1)
function M.process(argv, opts)
  local c = core()
  if not c then return nil, 'qoslab.core is not loadable: cannot run ' .. tostring(argv[1]), 'ENOTSUP' end
  return c.process(argv, opts)
end

--- Make a new private directory (mkdtemp(3): mode 0700, a name no one
-- had): `prefix` followed by six random characters.
-- @tparam string prefix e.g. "/tmp/qoslab-ssh-"
-- @treturn string|nil the directory, or nil, message, CODE ("ENOENT" when
--   the parent is missing, "EACCES", ...)
-- @usage local dir = assert(fs.mkdtemp('/tmp/qoslab-ssh-'))
function M.mkdtemp(prefix)
  local c = core()
  if not c then return nil, 'qoslab.core is not loadable: cannot make ' .. tostring(prefix), 'ENOTSUP' end
  if not usable(prefix) then return nil, 'not a usable path: ' .. string.format('%q', tostring(prefix)), 'EINVAL' end
  return c.mkdtemp(prefix)
end

--- The first executable file named `name` in $PATH (like `command -v`).
-- @tparam string name
-- @treturn string|nil absolute path
function M.which(name)
  if not usable(name) or name:find('/', 1, true) then return nil end
  for d in (os.getenv('PATH') or ''):gmatch('[^:]+') do
    local p = d .. '/' .. name
    local attr = lfs.attributes(p)
    if attr and attr.mode == 'file' and attr.permissions:find('x', 1, true) then
      if p:sub(1, 1) ~= '/' then p = M.realpath(p) or p end
      return p
    end
  end
  return nil
end

return M
