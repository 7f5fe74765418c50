--- Where `qoslab client` and `qoslab server` write, as iperf3 does: every
-- line to stdout or, with `--logfile FILE`, appended to FILE (errors too);
-- with `--timestamps[=FORMAT]` each text line starts with the local time in
-- strftime's FORMAT (default "%c ", iperf3's), before the `-T` title. JSON
-- (`-J`, `--json-stream`) is written bare, as iperf3 writes it.
-- @module qoslab.cli.output

local M = {}

--- iperf3's default `--timestamps` format.
M.DEFAULT_TIME_FORMAT = '%c '

-- "%s" (seconds since the epoch, a GNU extension iperf3 users write) is
-- not one of the C99 conversions Lua's os.date takes: it is put in first.
local function render(fmt, now)
  local out = fmt:gsub('%%(.)', function(c)
    if c == 's' then return tostring(now) end
  end)
  return os.date(out, now)
end

--- Check a `--timestamps` format: Lua's `os.date` refuses conversions
-- outside C99's (and `%s`, which is supported here), so a bad one is an
-- error at the flag, not mid-test.
-- @tparam string fmt
-- @treturn string fmt, or nil and a message naming the flag
function M.check_time_format(fmt)
  if type(fmt) ~= 'string' or fmt == '' then
    return nil, '--timestamps: expected a strftime format, e.g. --timestamps="%F %T "'
  end
  local ok, err = pcall(render, fmt, os.time())
  if not ok then
    -- os.date quotes the rest of the format from the bad conversion on
    -- ('%Q%E%O', '%N '): name the conversion itself
    local why = tostring(err):match('%((.*)%)$') or tostring(err)
    local i = 1
    while true do
      local at = fmt:find('%', i, true)
      if not at then break end
      local spec = fmt:match('^%%[EO].', at) or fmt:sub(at, at + 1)
      if spec ~= '%s' and not pcall(os.date, spec, 0) then
        why = spec == '%' and "a '%' at the end"
          or string.format("invalid conversion specifier '%s'", spec)
        break
      end
      i = at + #spec
    end
    return nil, string.format("--timestamps: '%s' is not a strftime format (%s; C99's "
      .. 'conversions and %%s)', fmt, why)
  end
  return fmt
end

--- The timestamp prefix of a line now ("" without --timestamps).
-- @tparam string|nil fmt
-- @treturn string
function M.stamp(fmt)
  return fmt and render(fmt, os.time()) or ''
end

-- The message and code of a path option's file that io.open refused:
-- "FLAG: cannot open PATH: REASON", CODE (ENOENT, EACCES, ...).
local function open_error(flag, path, msg, errno)
  local code = ({ [2] = 'ENOENT', [13] = 'EACCES', [20] = 'ENOTDIR', [21] = 'EISDIR',
    [28] = 'ENOSPC', [30] = 'EROFS', [36] = 'ENAMETOOLONG' })[errno]
    or 'EIO'
  local why = tostring(msg)
  if why:sub(1, #path + 2) == path .. ': ' then why = why:sub(#path + 3) end
  return string.format('%s: cannot open %s: %s', flag, path, why), code
end

--- Check, before a test runs, that an output file can be written where a
-- path option names it (its folder exists and takes a new file), as
-- `--logfile` is checked: the file is opened for appending, and removed
-- again when it did not exist. Nothing is created on the way (no folder).
-- @tparam string flag the option, for the message (e.g. "--plot")
-- @tparam string path
-- @treturn true, or nil, "FLAG: cannot open PATH: REASON", CODE (ENOENT,
--   EACCES, ENOTDIR, EISDIR, EROFS, ...)
function M.check_writable(flag, path)
  local existed = io.open(path, 'r')
  if existed then existed:close() end
  local f, msg, errno = io.open(path, 'a')
  if not f then return nil, open_error(flag, path, msg, errno) end
  f:close()
  if not existed then os.remove(path) end
  return true
end

local Sink = {}
Sink.__index = Sink

--- Open the output of a command.
-- @tparam table a parsed flags: `logfile` (string or nil), `timestamps`
--   (nil, or a list holding the format or nothing: argparse's `args('?')`)
-- @treturn table a sink with `:line(title, text)`, `:json(text)`,
--   `:err(text)` and `:close()`; or nil, message, CODE when the log file
--   cannot be opened (the reason's code, e.g. EACCES, ENOENT)
-- @usage local sink = assert(output.open{ logfile = 'run.log' })
function M.open(a)
  local fmt
  if a.timestamps then
    fmt = a.timestamps[1] or M.DEFAULT_TIME_FORMAT
    local good, msg = M.check_time_format(fmt)
    if not good then return nil, msg, 'EINVAL' end
  end
  local f = io.stdout
  if a.logfile then
    local lf, msg, errno = io.open(a.logfile, 'a')
    if not lf then return nil, open_error('--logfile', a.logfile, msg, errno) end
    f = lf
  end
  return setmetatable({ f = f, fmt = fmt, own = f ~= io.stdout }, Sink)
end

--- Write one text line: timestamp, title ("TITLE:  "), text; flushed.
-- @tparam string|nil title
-- @tparam string text
function Sink:line(title, text)
  self.f:write(M.stamp(self.fmt), title and (title .. ':  ') or '', text, '\n')
  self.f:flush()
end

--- Write JSON text as it is (no timestamp, no title), flushed.
-- @tparam string text
function Sink:json(text)
  self.f:write(text, '\n')
  self.f:flush()
end

--- Write an error line: to the log file when there is one, else stderr,
-- with the timestamp.
-- @tparam string text
function Sink:err(text)
  local f = self.own and self.f or io.stderr
  f:write(M.stamp(self.fmt), text, '\n')
  f:flush()
end

--- Close the log file (stdout stays open).
function Sink:close()
  if self.own and self.f then self.f:close() end
  self.f = nil
end

return M
