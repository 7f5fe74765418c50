--- Impairments that change over time: a list of steps, each a whole netem
-- spec from its time on, applied by a native thread at its planned instant
-- while the Lua thread is blocked elsewhere (in a traffic test).
--
-- A step is `{at_s = SECONDS, <netem spec keys>}` (`qoslab.netem`'s keys,
-- units in the names). It replaces the impairment as a whole, as
-- `qoslab.netem.apply` does: keys left out are off. Steps are in time order;
-- `at_s` counts from the schedule's start (the call that started it). A
-- finished schedule leaves its last step in force (the next test runs under
-- it): `tb:impair {}` (or another spec) restores the path.
--
-- **Timing.** Step i is due at start + at_s (absolute CLOCK_MONOTONIC
-- instants, so a late step never shifts the next one). A thread of the C
-- core (csrc/core/schedule.c) waits for each instant and then replaces the
-- netem (kernel netem: one RTM_NEWQDISC over its own rtnetlink socket in the
-- target's namespace) or swaps the native link's spec (its change is
-- atomic). Every step is checked, and its wire form built, before the first
-- one runs. Each change is recorded with its planned time and its actual time
-- (when the kernel acknowledged it or the link took it); its lag is the
-- difference.
--
-- **One at a time.** A target (a direction of the native link or of a
-- testbed, a kernel netem) runs one schedule at a time: a second one raises
-- while the first runs (`s:stop()` it first), and starts once the first
-- finished or was stopped (`s:running()` tells).
--
-- **Traces.** `read_csv` turns a CSV trace (`time_s,<spec keys>`) into steps;
-- `read_mahimahi` turns a mahimahi packet-delivery trace into rate steps.
--
-- **Results.** `sched:attach(res)` puts the changes into a traffic result on
-- the test's own clock (`res.impairment_changes`, `res.impairment_lag_ms`,
-- and each interval's `impairment`), which `qoslab.plot.timeseries` draws as
-- a panel under throughput and RTT (manual/results.md).
-- @module qoslab.schedule
local core = require 'qoslab.core'
local check = require 'qoslab.check'

local M = {}

-- The netem module, loaded when first needed (it requires this one).
local function netem() return require 'qoslab.netem' end

--- The most steps a schedule takes, and so the bound of the trace readers
-- (`read_csv`'s data lines, `read_mahimahi`'s windows): 100000, the C
-- core's bound (a spec per step is kept in memory; 100000 windows of 100 ms
-- are 10000 s of trace).
M.MAX_STEPS = core.SCHEDULE_MAX_STEPS

local function is_list(t)
  if type(t) ~= 'table' then return false end
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n == #t
end

local function pat(s) return (s:gsub('%p', '%%%0')) end

-- Check spec as `qoslab.netem.check` does, with netem's message naming
-- `field` for every "spec" in it (the field, and a cross-field rule's other
-- field); raised at `level` as error() counts it from the function calling
-- this. Returns the canonical spec.
local function check_spec(spec, ctx, field, level)
  local ok, canon = pcall(netem().check, spec, ctx)
  if ok then return canon end
  local msg = tostring(canon):gsub('^' .. pat(ctx) .. ': ', '', 1)
  msg = (' ' .. msg):gsub('([%s%(])spec([%.:])', '%1' .. field:gsub('%%', '%%%%') .. '%2'):sub(2)
  error(ctx .. ': ' .. msg, level + 1)
end

-- Raise when a public function got more arguments than it takes (a
-- second table given to a reader that takes none, say): `n` it takes, the
-- rest in `...`; at the public function's caller.
local function no_more(ctx, n, ...)
  for i = 1, select('#', ...) do
    local v = select(i, ...)
    if v ~= nil then
      check.fail(ctx, 'argument ' .. (n + i), string.format('nothing (it takes %d)', n), v, 2)
    end
  end
end

--- Check steps (without touching anything) and return them in canonical
-- form: a list of `{at_s =, spec = canonical spec}` (the spec as
-- `qoslab.netem.check` returns it).
-- @tparam table steps a non-empty list of `{at_s = number >= 0, <spec keys>}`
--   in time order (equal times allowed: the later step wins at once), at
--   most `MAX_STEPS` of them
-- @tparam[opt] string ctx prefix of error messages (default
--   "qoslab.schedule.check")
-- @tparam[opt] string backend "netem" (default) or "link" (which has no
--   `limit_packets = "auto"`)
-- @treturn table the canonical steps
-- @raise `"<ctx>: steps[3].delay_ms: expected ..."`: netem's own checks and
--   wording with the step named in place of `spec`; `steps[2].at_s` when a
--   time is missing, negative, not finite or before the previous step's;
--   `steps` when the list is empty, not a list or longer than `MAX_STEPS`
-- @usage local s = schedule.check{{at_s = 0, delay_ms = 20}, {at_s = 5, delay_ms = 200}}
function M.check(steps, ctx, backend)
  ctx = ctx or 'qoslab.schedule.check'
  if not is_list(steps) or #steps == 0 then
    local got = check.describe(steps)
    if type(steps) == 'table' then
      got = next(steps) == nil and 'an empty list' or 'a table that is not a list'
    end
    error(string.format('%s: steps: expected a non-empty list of steps, got %s', ctx, got), 2)
  end
  if #steps > M.MAX_STEPS then
    error(string.format('%s: steps: expected at most %d steps (qoslab.schedule.MAX_STEPS), got %d',
      ctx, M.MAX_STEPS, #steps), 2)
  end
  local out, prev = {}, nil
  for i, step in ipairs(steps) do
    local field = string.format('steps[%d]', i)
    if type(step) ~= 'table' then
      error(string.format('%s: %s: expected a table {at_s =, <spec keys>}, got %s', ctx, field,
        type(step)), 2)
    end
    local at = step.at_s
    if math.type(at) == nil or at ~= at or at < 0 or at > 1e9 then
      error(string.format('%s: %s.at_s: expected a finite number of seconds in [0, 1e9], got %s',
        ctx, field, check.describe(at)), 2)
    end
    if prev and at < prev then
      error(string.format('%s: %s.at_s: expected >= steps[%d].at_s = %s (steps in time order), got %s',
        ctx, field, i - 1, tostring(prev), tostring(at)), 2)
    end
    prev = at
    local spec = {}
    for k, v in pairs(step) do if k ~= 'at_s' then spec[k] = v end end
    local canon = check_spec(spec, ctx, field, 2)
    if backend == 'link' and canon.limit_packets == 'auto' then
      error(string.format('%s: %s.limit_packets: "auto" is kernel netem\'s (sized from the device); '
        .. 'with backend = "link" give a number of packets', ctx, field), 2)
    end
    out[i] = { at_s = at, spec = canon }
  end
  return out
end

--- The most bytes a trace reader reads: 64 MiB (a CSV trace of
-- `MAX_STEPS` lines is a few MB, mahimahi's own traces are below 10 MB). A
-- larger file is refused before it is read (EFBIG).
M.MAX_TRACE_BYTES = 64 << 20

-- The lines of the trace at path: an iterator giving line number and line
-- (without its end, a CR before it too); or nil, message, CODE as
-- `core.read_regular_file` fails (ENOENT, EACCES, EISDIR, EFTYPE for a FIFO
-- or device, which it never opens to wait on, EFBIG, EIO), the message
-- "<ctx>: <path>: ..." with its advice.
local function read_lines(ctx, path)
  local text, msg, code = core.read_regular_file(path, M.MAX_TRACE_BYTES, ctx .. ':')
  if not text then return nil, msg, code end
  local pos, ln = 1, 0
  return function()
    if pos > #text then return nil end
    local e = text:find('\n', pos, true) or #text + 1
    local line = text:sub(pos, e - 1)
    pos, ln = e + 1, ln + 1
    return ln, (line:gsub('\r$', ''))
  end
end

-- A trace reader's path, checked at the reader's caller.
local function check_path(ctx, path)
  if type(path) ~= 'string' then check.fail(ctx, 'path', 'a string', path, 2) end
  check.cstring(ctx, 'path', path, nil, 2)
end

-- A cell's number when it is written in decimal notation ("20", "-1.5",
-- ".5", "2e6"), else nil: tonumber alone also reads "0x10" as 16 and
-- "1e400" as inf (which the spec's checks then refuse by its value).
local function decimal(s)
  local mant = s:match('^[+-]?([%d.]+)[eE][+-]?%d+$') or s:match('^[+-]?([%d.]+)$')
  if not mant or not mant:find('%d') or mant:find('%..*%.') then return nil end
  return tonumber(s)
end

--- The most bytes of a piece of a trace (a line, a cell, a column name) a
-- trace reader's message quotes; a longer one is cut there, followed by
-- "…" and its length in bytes.
M.MAX_QUOTED_BYTES = 40

-- A piece of a trace as a message quotes it: at most MAX_QUOTED_BYTES of
-- it, every byte that is not printable ASCII (also `"` and `\`) escaped,
-- so a binary or huge file cannot flood a log or a terminal.
local function quoted(s)
  local cut = #s > M.MAX_QUOTED_BYTES
  local shown = (cut and s:sub(1, M.MAX_QUOTED_BYTES) or s):gsub('["\\]', '\\%0')
    :gsub('[^\32-\126]', function(c) return string.format('\\x%02X', c:byte()) end)
  if not cut then return '"' .. shown .. '"' end
  return string.format('"%s…" (%d bytes)', shown, #s)
end

-- message m of a step's check with each string value of step the binding
-- quoted whole (`"<value>"`, NUL as \0) quoted as `quoted` quotes it.
local function requote(m, step)
  for _, v in pairs(step) do
    if type(v) == 'string' then
      local whole = '"' .. v:gsub('%z', '\\0') .. '"'
      local i, j = m:find(whole, 1, true)
      if i then m = m:sub(1, i - 1) .. quoted(v) .. m:sub(j + 1) end
    end
  end
  return m
end

local function cell_value(s)
  if s == 'true' then return true end
  if s == 'false' then return false end
  local n = decimal(s)
  if n ~= nil then return n end
  return s
end

-- The columns a CSV trace may have after time_s: netem's spec keys (the
-- binding's own list, the one its checks use).
local SPEC_KEYS = {}
for _, k in ipairs(core.NETEM_SPEC_KEYS) do SPEC_KEYS[k] = true end

local csv_steps

--- Read a CSV trace into steps. The first line is the header: `time_s`
-- first, then any of `qoslab.netem`'s top-level spec keys, each once (e.g.
-- `time_s,delay_ms,loss_pct,rate_bps`); every further line is a step from
-- `time_s` on (seconds from the schedule's start, not decreasing). An empty
-- cell leaves that key out of the step (off); numbers are read in decimal
-- notation only (`20`, `0.5`, `1e6`; not `0x10`, `nan` or `inf`),
-- `true`/`false` as booleans, anything else as a string (a distribution
-- name). Blank lines and lines starting with `#` are skipped. Each line is
-- checked as it is read, by the checks a step gets (`check`: netem's rules
-- for each value, the range of `time_s`), so a bad value is named by its
-- file, line and column.
-- @tparam string path the file (no NUL bytes), at most `MAX_TRACE_BYTES`
-- @treturn table steps `{{at_s =, <key> = value, ...}, ...}`
-- @return or nil, message, CODE: "EINVAL" for bad content, the message
--   `"<ctx>: <path>:<line>: <column>: expected ..., got ..."` (a header
--   that does not start with time_s, an unknown or repeated column, a line
--   without as many cells as the header, a value a step refuses, a time
--   before the previous line's, more than `MAX_STEPS` data lines, or no
--   header or no step at all; a piece of the file the message quotes is
--   cut to `MAX_QUOTED_BYTES`, followed by "…" and its length in bytes, and
--   any byte not printable ASCII is shown as `\xNN`); "ENOENT" (no such
--   file), "EACCES" (not readable), "EISDIR" (a directory), "EFTYPE" (a
--   FIFO, device or socket),
--   "EFBIG" (larger than `MAX_TRACE_BYTES`), "EIO"
-- @raise when path is not a string (or has a NUL byte), or a second
--   argument is given (read_csv takes only the path)
-- @usage local steps = assert(schedule.read_csv('path.csv'))
function M.read_csv(path, ...)
  local ctx = 'qoslab.schedule.read_csv'
  check_path(ctx, path)
  no_more(ctx, 1, ...)
  local lines, msg, code = read_lines(ctx, path)
  if not lines then return nil, msg, code end
  return csv_steps(ctx, path, lines)
end

-- read_csv's parser over the lines of read_lines.
function csv_steps(ctx, path, lines)
  local head, steps, prev, prev_ln = nil, {}, nil, nil
  local function bad(ln, fmt, ...)
    return nil, string.format('%s: %s:%d: ' .. fmt, ctx, path, ln, ...), 'EINVAL'
  end
  for ln, line in lines do
    if line:match('^%s*$') or line:match('^%s*#') then goto continue end
    local cells = {}
    for c in (line .. ','):gmatch('([^,]*),') do cells[#cells + 1] = c:match('^%s*(.-)%s*$') end
    if not head then
      if cells[1] ~= 'time_s' then
        return bad(ln, 'expected a header starting with time_s, got %s', quoted(line))
      end
      head = cells
      local seen = { time_s = 1 }
      for j = 2, #head do
        local k = head[j]
        if seen[k] then
          return bad(ln, 'column %d: expected each column once, got %s again (column %d)', j, quoted(k), seen[k])
        end
        if not SPEC_KEYS[k] then
          return bad(ln, 'column %d: expected a spec key (known keys: %s), got %s', j,
            table.concat(core.NETEM_SPEC_KEYS, ', '), quoted(k))
        end
        seen[k] = j
      end
    else
      if #cells ~= #head then
        return bad(ln, 'expected %d columns as the header, got %d', #head, #cells)
      end
      local t = decimal(cells[1])
      if not t then
        return bad(ln, 'time_s: expected a number of seconds in decimal notation, got %s', quoted(cells[1]))
      end
      if #steps == M.MAX_STEPS then
        return bad(ln, 'expected at most %d steps (data lines; qoslab.schedule.MAX_STEPS), got more',
          M.MAX_STEPS)
      end
      local step = { at_s = t }
      for j = 2, #head do
        if cells[j] ~= '' then step[head[j]] = cell_value(cells[j]) end
      end
      -- the checks a step gets, named by the line's column
      local ok, err = pcall(M.check, { step }, ctx)
      if not ok then
        local m = requote(tostring(err), step):gsub('^' .. pat(ctx) .. ': ', '', 1)
          :gsub('steps%[1%]%.at_s', 'time_s'):gsub('steps%[1%]%.', '')
        return bad(ln, '%s', m)
      end
      if prev and t < prev then
        return bad(ln, 'time_s: expected >= %s (the time on line %d: times in order), got %s',
          tostring(prev), prev_ln, #cells[1] > M.MAX_QUOTED_BYTES and quoted(cells[1]) or cells[1])
      end
      prev, prev_ln = t, ln
      steps[#steps + 1] = step
    end
    ::continue::
  end
  if not head then return nil, string.format('%s: %s: no header line', ctx, path), 'EINVAL' end
  if #steps == 0 then return nil, string.format('%s: %s: no steps', ctx, path), 'EINVAL' end
  return steps
end

local MAHIMAHI_PACKET_BYTES = 1500

-- The delivery opportunities of a mahimahi trace as ms of one period, in
-- order (`ks.period` the period): a time t >= 1 is ms t - 1, a time 0 the
-- period's last ms (the trace repeats: 0 and the period are one instant);
-- or nil, message, "EINVAL".
local function mahimahi_times(ctx, path, lines)
  local times, zeros, prev = {}, 0, 0
  for ln, line in lines do
    if not line:match('^%s*$') then
      local t = line:match('^%s*(%d+)%s*$')
      t = t and math.tointeger(tonumber(t))
      if not t then
        return nil, string.format('%s: %s:%d: expected an integer of ms, got %s', ctx, path, ln, quoted(line)),
          'EINVAL'
      end
      if t < prev then
        return nil, string.format('%s: %s:%d: times must not decrease (%d after %d)', ctx, path, ln,
          t, prev), 'EINVAL'
      end
      if t == 0 then zeros = zeros + 1 else times[#times + 1] = t - 1 end
      prev = t
    end
  end
  if prev == 0 then
    return nil, string.format('%s: %s: expected times with a last one > 0 ms (the period)', ctx, path),
      'EINVAL'
  end
  for _ = 1, zeros do times[#times + 1] = prev - 1 end
  times.period = prev
  return times
end
--- The smallest rate netem takes (bits/s): what a window without a delivery
-- opportunity becomes (the packets wait, as on the real path), since rate 0
-- means "no limit".
M.MIN_RATE_BPS = 8

--- Read a mahimahi packet-delivery trace into rate steps. The format (as
-- mahimahi's link shell reads it): one integer per line, a time in ms at
-- which one 1500-byte packet may leave; a time may repeat (several packets
-- in that ms); the times do not decrease; the trace repeats with a period
-- equal to its last time. Netem and the native link have a rate, not
-- delivery opportunities, so the trace becomes one step per window of
-- `window_ms`: rate_bps = opportunities in the window × 1500 × 8 / window.
-- Within a window the packets are spaced evenly instead of at the trace's
-- instants; over each window the bytes delivered are the trace's exactly.
-- @tparam string path the file (no NUL bytes), at most `MAX_TRACE_BYTES`
-- @tparam table opts
--   * `duration_s` (number in (0, 1e6], required): how long to replay (the
--     trace loops); at most `MAX_STEPS` windows (10000 s of 100 ms windows)
--   * `window_ms` (integer 1..60000, default 100)
--   * `spec` (table, default {}): other spec keys every step carries (e.g.
--     `{delay_ms = 20}`), checked as a step's spec; not `rate_bps`, which
--     is what the trace sets
-- @treturn table steps `{{at_s =, rate_bps =, ...}, ...}` (a window without
--   an opportunity gets `MIN_RATE_BPS`)
-- @return or nil, message, CODE: "EINVAL" (a line that is not a
--   non-negative integer, times that decrease, or a trace whose last time
--   is 0: the message names the file and line, and quotes the line as
--   `read_csv` quotes), or as `read_csv` fails to
--   read a file ("ENOENT", "EACCES", "EISDIR", "EFTYPE", "EFBIG", "EIO")
-- @raise on a bad path or bad opts, naming the field (`opts.duration_s`
--   also when its windows would be more than `MAX_STEPS`;
--   `opts.spec.<field>` as netem's checks name a step's field), or a third
--   argument
-- @usage local steps = assert(schedule.read_mahimahi('cell.up', {duration_s = 10}))
function M.read_mahimahi(path, opts, ...)
  local ctx = 'qoslab.schedule.read_mahimahi'
  check_path(ctx, path)
  check.table(ctx, 'opts', opts)
  no_more(ctx, 2, ...)
  check.keys(ctx, 'opts', opts, { duration_s = true, window_ms = true, spec = true }, 2)
  local dur = opts.duration_s
  if math.type(dur) == nil or dur ~= dur or dur <= 0 or dur > 1e6 then
    check.fail(ctx, 'opts.duration_s', 'a number of seconds in (0, 1e6]', dur)
  end
  local win = opts.window_ms or 100
  if math.type(win) ~= 'integer' or win < 1 or win > 60000 then
    check.fail(ctx, 'opts.window_ms', 'an integer in [1, 60000]', win)
  end
  local total_ms = math.ceil(dur * 1000)
  if (total_ms + win - 1) // win > M.MAX_STEPS then
    check.fail(ctx, 'opts.duration_s', string.format('at most %d windows of opts.window_ms = %d ms, '
      .. 'i.e. %g s (qoslab.schedule.MAX_STEPS steps)', M.MAX_STEPS, win, M.MAX_STEPS * win / 1000), dur)
  end
  local base = opts.spec or {}
  check.table(ctx, 'opts.spec', base)
  if base.rate_bps ~= nil then
    error(string.format('%s: opts.spec.rate_bps: the trace sets each window\'s rate_bps (from its '
      .. 'delivery opportunities): leave it out of opts.spec', ctx), 2)
  end
  -- the spec every step gets, checked once here: any rate stands for the
  -- trace's (the rules ask only whether there is one)
  local probe = check.raw_copy(base)
  probe.rate_bps = M.MIN_RATE_BPS
  check_spec(probe, ctx, 'opts.spec', 2)
  local lines, msg, code = read_lines(ctx, path)
  if not lines then return nil, msg, code end
  local ks
  ks, msg, code = mahimahi_times(ctx, path, lines)
  if not ks then return nil, msg, code end
  -- Opportunities in ms [0, x) of the replay, x >= 0: whole periods, then
  -- the ms of the period below x % period (a binary search in ks).
  local period, per_period = ks.period, #ks
  local function before(x)
    local r, lo, hi = x % period, 1, per_period + 1
    while lo < hi do
      local mid = (lo + hi) // 2
      if ks[mid] < r then lo = mid + 1 else hi = mid end
    end
    return (x // period) * per_period + lo - 1
  end
  local steps = {}
  for w0 = 0, total_ms - 1, win do
    local w1 = math.min(w0 + win, total_ms)
    local count = before(w1) - before(w0)
    local rate = count * MAHIMAHI_PACKET_BYTES * 8 * 1000 // (w1 - w0)
    local step = {}
    for k, v in pairs(base) do step[k] = v end
    step.at_s = w0 / 1000
    step.rate_bps = math.max(M.MIN_RATE_BPS, rate)
    steps[#steps + 1] = step
  end
  return steps
end

-- Schedule objects -------------------------------------------------------

local Schedule = {}
Schedule.__index = Schedule
Schedule.__name = 'qoslab.Schedule'

--- The changes made so far, in order: `{step =, at_s =, spec =, ok =,
-- planned_s =, actual_s =, lag_ms =, actual_unix_s =}` (times from the
-- schedule's start; `actual_s` when the change was in force: the kernel's
-- acknowledgement, or the link's swap; `lag_ms` = actual − planned), with
-- `message`, `code` when the change failed (`ok = false`).
-- @treturn table the list
function Schedule:changes()
  local out = {}
  for i, e in ipairs(self._core:entries()) do
    local c = { step = i, at_s = self.steps[i].at_s, spec = self.steps[i].spec, ok = e.ok,
      planned_s = e.planned_s, actual_s = e.actual_s, lag_ms = e.lag_ms,
      actual_unix_s = e.actual_unix_s, message = e.message, code = e.code }
    out[i] = c
    if not e.ok and not self._warned[i] then
      self._warned[i] = true
      if not self.quiet then
        io.stderr:write(string.format('qoslab.schedule: step %d (at %g s) failed: %s (%s)\n', i,
          c.at_s, tostring(e.message), tostring(e.code)))
      end
    end
  end
  return out
end

--- Whether a change failed: false, or true, message, CODE of the first one.
function Schedule:failed()
  for _, c in ipairs(self:changes()) do
    if not c.ok then return true, c.message, c.code end
  end
  return false
end

--- Lag of the changes so far: `{n =, mean_ms =, max_ms =}` (n = 0: both 0).
function Schedule:lag()
  local n, sum, mx = 0, 0, 0
  for _, c in ipairs(self:changes()) do
    if c.ok then
      n, sum = n + 1, sum + c.lag_ms
      if c.lag_ms > mx then mx = c.lag_ms end
    end
  end
  return { n = n, mean_ms = n > 0 and sum / n or 0, max_ms = mx }
end

--- Wait until every step ran (or the schedule was stopped).
-- @tparam[opt] number timeout_s default: no limit
-- @treturn boolean true when done, false when the timeout passed first
function Schedule:wait(timeout_s)
  if timeout_s ~= nil and (math.type(timeout_s) == nil or timeout_s ~= timeout_s or timeout_s < 0) then
    check.fail('qoslab.Schedule:wait', 'timeout_s', 'a number of seconds >= 0', timeout_s)
  end
  local waited = 0
  -- slices keep the interpreter's SIGINT hook able to run between them
  while true do
    local slice = 0.2
    if timeout_s then slice = math.min(slice, timeout_s - waited) end
    if self._core:wait(math.max(0, slice)) then return true end
    waited = waited + slice
    if timeout_s and waited >= timeout_s then return false end
  end
end

--- Whether steps are still to come: false once every step ran, or after
-- `stop` or `close`. Only a running schedule holds its target: once it is
-- done the next schedule there (on the link's direction, the netem, the
-- testbed's direction) may start, whether this one is still referenced or
-- not.
-- @treturn boolean
-- @usage if s:running() then s:stop() end
function Schedule:running() return not self._core:wait(0) end

--- Stop: the steps not yet due are dropped; one being applied completes.
function Schedule:stop() self._core:stop() end

--- Stop and release (also `__close`, `__gc`); idempotent.
function Schedule:close() self._core:close() end
Schedule.__close = Schedule.close

function Schedule:__tostring() return tostring(self._core) end

--- Put the changes into a traffic result, on the test's clock (the result's
-- `start_time_unix_s`, the zero of its intervals):
-- `res.impairment_changes` (the `changes()` list, each also with `test_s`
-- = actual on the test's clock and `planned_test_s`),
-- `res.impairment_lag_ms = {n =, mean_ms =, max_ms =}` and, in each interval,
-- `impairment` = the spec in force at the interval's midpoint (`{}` = none
-- yet: the impairment from before the schedule). A failed change stays in
-- the list with `ok = false`, `message`, `code` (and is written to stderr
-- unless the schedule was started `quiet`).
-- @tparam table res a `qoslab.traffic.run` result
-- @treturn table res
-- @raise when res has no `start_time_unix_s`
function Schedule:attach(res)
  local ctx = 'qoslab.Schedule:attach'
  check.table(ctx, 'res', res)
  local t0 = res.start_time_unix_s
  if math.type(t0) == nil then check.fail(ctx, 'res.start_time_unix_s', 'a number', t0) end
  local start = self._core:start_unix_s()
  local list = self:changes()
  for _, c in ipairs(list) do
    c.test_s = c.actual_unix_s - t0
    c.planned_test_s = start + c.planned_s - t0
  end
  res.impairment_changes = list
  res.impairment_lag_ms = self:lag()
  for _, iv in ipairs(res.intervals or {}) do
    local mid = ((iv.start_s or 0) + (iv.end_s or 0)) / 2
    local spec = {}
    for _, c in ipairs(list) do
      if c.ok and c.test_s <= mid then spec = c.spec end
    end
    iv.impairment = spec
  end
  return res
end

-- Levels: a function below that takes `level` raises where error(msg,
-- level) would in its caller, so a message points at the line that called
-- the public entry point (schedule.link, schedule.netem and
-- qoslab.netem.schedule, schedule.testbed and qoslab.Testbed:schedule)
-- however many frames lie between.

-- The schedule started last on each target (a link's direction, a netem's
-- place), to refuse a second one there while the first runs (their steps
-- would replace each other's). Weak: a schedule collected was stopped by
-- its __gc.
local holders = setmetatable({}, { __mode = 'v' })

-- "(1 of 3 steps done, the last at at_s = 30)"
local function progress(s)
  return string.format('%d of %d steps done, the last at at_s = %s', #s._core:entries(), #s.steps,
    tostring(s.steps[#s.steps].at_s))
end

-- The refusal of a change to a target `what` names ("the forward direction
-- of the link") while schedule s runs there; `one` names what to stop ("that
-- one" when the change is a second schedule, "it" otherwise).
local function busy_message(ctx, what, s, one)
  return string.format('%s: %s still runs a schedule (%s): stop %s first (s:stop()), '
    .. 'or wait until it ends (s:wait())', ctx, what, progress(s), one)
end

-- Raise when the schedule at holders[key] still runs; `what` names the
-- target ("the forward direction of the link").
local function refuse_running(ctx, key, what, level)
  local s = holders[key]
  if s and s:running() then error(busy_message(ctx, what, s, 'that one'), level + 1) end
end

-- The key a netem's schedule is held at: device, namespace, parent (as
-- core.netem_check resolves them).
local function netem_key(ifname, where)
  return table.concat({ 'netem', where.netns or '', ifname, where.parent or 'root' }, '|')
end

-- For qoslab.netem.apply/update: raise at `level` when a schedule runs on
-- the egress netem of ifname at where (the opts core.netem_check resolved):
-- its next step would replace the change.
function M._refuse_netem(ctx, ifname, where, level)
  if where.direction ~= nil and where.direction ~= 'egress' then return end
  local s = holders[netem_key(ifname, where)]
  if s and s:running() then
    error(busy_message(ctx, string.format('the netem of %s (%sparent %s)', ifname,
      where.netns and ('namespace ' .. where.netns .. ', ') or '', where.parent or 'root'), s, 'it'),
      level + 1)
  end
end

-- For qoslab.Testbed:impair: raise at `level` when a schedule runs on the
-- testbed's direction dir (its next step would replace the change, and
-- `attach` would record the schedule's spec for the intervals after it).
function M._refuse_testbed(ctx, tb, dir, level)
  for _, s in ipairs(tb._schedules or {}) do
    if s._direction == dir and s:running() then
      error(busy_message(ctx, string.format('the %s direction', dir), s, 'it'), level + 1)
    end
  end
end

-- Start the C schedule: kind "netem"|"link", target as core.schedule_start
-- takes it, canonical steps, the wire spec of each; held at key.
local function start(kind, target, steps, wires, quiet, key, level)
  local at = {}
  for i, s in ipairs(steps) do at[i] = s.at_s end
  -- the monotonic time its step times count from (within the start call)
  local t0 = core.now()
  local c, msg, code = check.call(level + 1, core.schedule_start, kind, target, at, wires)
  if not c then return nil, msg, code end
  local s = setmetatable({ _core = c, steps = steps, kind = kind, quiet = quiet, _warned = {},
    _wires = wires, _t0 = t0 }, Schedule)
  holders[key] = s
  return s
end

-- Steps on a link's direction: the running check, then start.
local function start_link(ctx, link, dir, canon, wires, quiet, level)
  local key = string.format('link %p %s', link, dir)
  refuse_running(ctx, key, string.format('the %s direction of the link', dir), level + 1)
  return start('link', { link = link, direction = dir }, canon, wires, quiet, key, level + 1)
end

-- The common options: direction ("forward" | "reverse") and quiet.
local OPT_KEYS = { quiet = true, direction = true }
local function link_opts(ctx, opts, level)
  opts = opts or {}
  check.table(ctx, 'opts', opts, level)
  check.keys(ctx, 'opts', opts, OPT_KEYS, level + 1)
  local dir = check.enum(ctx, 'opts.direction', opts.direction, { 'forward', 'reverse' }, 'forward', level)
  local quiet = check.boolean(ctx, 'opts.quiet', opts.quiet, false, level)
  return dir, quiet
end

local function is_link(v)
  local mt = type(v) == 'userdata' and getmetatable(v)
  return type(mt) == 'table' and mt.__name == 'qoslab.ImpairLink'
end

--- Run steps on the native impairment link (`qoslab.link.impair_link`):
-- each step is the link's atomic spec swap for one direction. Each
-- direction runs one schedule at a time: a second one is refused while the
-- first runs; once it finished (or was stopped) the next takes its place.
-- @tparam userdata link an open `qoslab.ImpairLink`
-- @tparam table steps as `check` takes them (or `read_csv`/`read_mahimahi` give)
-- @tparam[opt] table opts `direction` = "forward" (default) | "reverse",
--   `quiet` (boolean, default false: true = no stderr line for a failed change)
-- @treturn table a schedule (methods `changes`, `lag`, `failed`, `running`,
--   `wait`, `stop`, `close`, `attach`), already running
-- @return or nil, message, CODE (the thread could not start)
-- @raise at the caller's line, in this order: link not a
--   `qoslab.ImpairLink` or closed, bad opts (an unknown key, a direction
--   or quiet of the wrong type), a bad step (as `check`, with backend
--   "link"), a schedule still running on that direction of the link
-- @usage local s = schedule.link(l, {{at_s = 0, delay_ms = 10}, {at_s = 2, delay_ms = 100}})
function M.link(link, steps, opts)
  local ctx = 'qoslab.schedule.link'
  if not is_link(link) then check.fail(ctx, 'link', 'a qoslab.ImpairLink', link) end
  -- a closed link raises from each of its methods
  if not pcall(link.failed, link) then error(ctx .. ': link: the link is closed', 2) end
  local dir, quiet = link_opts(ctx, opts, 2)
  local canon = check.call(2, M.check, steps, ctx, 'link')
  local wires = {}
  for i, s in ipairs(canon) do wires[i] = s.spec end
  local s, msg, code = start_link(ctx, link, dir, canon, wires, quiet, 2)
  return s, msg, code
end

-- schedule.netem's body under ctx; what names the
-- target in the refusal of a second schedule (default: the device).
local function netem_impl(ctx, level, ifname, steps, opts, what)
  opts = opts or {}
  check.table(ctx, 'opts', opts, level)
  local quiet = check.boolean(ctx, 'opts.quiet', opts.quiet, false, level)
  local nopts = {}
  for k, v in pairs(opts) do if k ~= 'quiet' then nopts[k] = v end end
  if nopts.direction ~= nil and nopts.direction ~= 'egress' then
    check.fail(ctx, 'opts.direction', '"egress" (a schedule replaces an egress netem)', nopts.direction,
      level)
  end
  -- the device and opts first (netem's own checks), then the steps
  local _, where = check.call(level + 1, core.netem_check, ctx, 'apply', ifname, {}, nopts)
  local canon = check.call(level + 1, M.check, steps, ctx)
  local N = netem()
  local wires = {}
  for i, s in ipairs(canon) do
    local w, o = check.call(level + 1, core.netem_check, ctx, 'apply', ifname, s.spec, nopts)
    if w.limit_packets == 'auto' then
      w.limit_packets = math.max(1000, (N.needed_limit(ifname, w, nopts)))
    end
    if w.keep_order then
      if not w.rate_bps then
        local mbps = core.link_speed_mbps(ifname, o.netns)
        w.rate_bps = mbps and mbps * 1000000 or 100e9
      end
      w.keep_order = nil
    end
    wires[i] = w
  end
  local key = netem_key(ifname, where)
  refuse_running(ctx, key, what or string.format('the netem of %s (%sparent %s)', ifname,
    where.netns and ('namespace ' .. where.netns .. ', ') or '', where.parent or 'root'), level + 1)
  local have, msg, code = N.get(ifname, nopts)
  if have == nil and msg then return nil, msg, code end
  if have == nil then
    local ok, m2, c2 = N.apply(ifname, canon[1].spec, { netns = nopts.netns,
      parent = nopts.parent, handle = nopts.handle, quiet = quiet })
    if not ok then return nil, m2, c2 end
  end
  return start('netem', { ifname = ifname, netns = nopts.netns, parent = nopts.parent,
    handle = nopts.handle }, canon, wires, quiet, key, level + 1)
end
M._netem = netem_impl

--- Run steps on a kernel netem (`qoslab.netem.schedule` is this function).
-- Each step is resolved as `qoslab.netem.apply` resolves a spec
-- (`limit_packets = "auto"` sized for the step, `keep_order` turned into a
-- rate) before the first runs; each is then one atomic replace of the netem.
-- If no netem is there yet, the first step's spec is applied at once through
-- `qoslab.netem.apply` (so the qdisc is known to cleanup), and again at its time.
-- One schedule runs on a netem (device, namespace, parent) at a time: a
-- second one is refused while the first runs, not once it finished.
-- @tparam string ifname device
-- @tparam table steps as `check` takes them
-- @tparam[opt] table opts `netns`, `parent`, `handle` (as `qoslab.netem.apply`;
--   egress only), `quiet` (boolean, default false)
-- @treturn table a schedule (see `link`), already running
-- @return or nil, message, CODE: that of the first apply (ENODEV, EPERM, ...)
--   or of the thread's start
-- @raise at the caller's line, in this order: a bad ifname or opts, a bad
--   step (naming `steps[i].<field>`), a schedule still running on that netem
-- @usage local s = netem.schedule('veth0', {{at_s = 0, delay_ms = 20}, {at_s = 5, delay_ms = 200, loss_pct = 1}})
function M.netem(ifname, steps, opts)
  local s, msg, code = netem_impl('qoslab.netem.schedule', 2, ifname, steps, opts)
  return s, msg, code
end

-- schedule.testbed's body (what qoslab.Testbed:schedule calls: a frame
-- nearer its caller than schedule.testbed).
local function testbed_impl(level, tb, steps, opts, where, linkops)
  local ctx = 'qoslab.Testbed:schedule'
  local mt = type(tb) == 'table' and getmetatable(tb)
  if type(mt) ~= 'table' or mt.__name ~= 'qoslab.Testbed' then
    check.fail(ctx, 'tb', 'a qoslab.Testbed', tb, level)
  end
  if tb._closed then error(ctx .. ': the testbed is closed', level + 1) end
  local dir, quiet = link_opts(ctx, opts, level + 1)
  if type(where) ~= 'function' then
    check.fail(ctx, 'where', 'a function (direction) -> ifname, netns, parent', where, level)
  end
  if type(steps) == 'string' then
    check.cstring(ctx, 'steps', steps, nil, level)
    local st, msg, code = M.read_csv(steps)
    if not st then return nil, msg, code end
    steps = st
  end
  -- the testbed sizes "auto" for its link (linkops.spec), as tb:impair does
  local canon = check.call(level + 1, M.check, steps, ctx,
    not (linkops and linkops.spec) and tb.backend or nil)
  -- the schedules done are forgotten (the testbed keeps what they left in
  -- force: linkops.retire); one still running on this direction refuses
  local live = {}
  for _, old in ipairs(tb._schedules or {}) do
    if old:running() then
      if old._direction == dir then
        error(busy_message(ctx, string.format('the %s direction', dir), old, 'that one'), level + 1)
      end
      live[#live + 1] = old
    elseif linkops and linkops.retire then
      linkops.retire(old)
    end
  end
  tb._schedules = live
  local s, msg, code
  if tb._link then
    if linkops and linkops.failure then
      local fmsg, fcode = linkops.failure()
      if fmsg then return nil, fmsg, fcode end
    end
    local wires = {}
    for i, c in ipairs(canon) do wires[i] = linkops and linkops.spec and linkops.spec(c.spec) or c.spec end
    s, msg, code = start_link(ctx, tb._link, dir, canon, wires, quiet, level + 1)
  else
    local ifname, ns, parent = where(dir)
    s, msg, code = netem_impl(ctx, level + 1, ifname, steps, { netns = ns, parent = parent, quiet = quiet },
      string.format('the %s direction', dir))
  end
  if not s then return nil, msg, code end
  s._direction = dir
  tb._schedules[#tb._schedules + 1] = s
  return s
end
M._testbed = testbed_impl

--- Run steps on one direction of a testbed while tests run
-- (`qoslab.Testbed:schedule` calls it): on the native link with
-- backend "link", else on the netem at the place `tb:impair` uses. Each
-- direction runs one schedule at a time: a second one is refused while the
-- first runs; a schedule that finished (or was stopped) is forgotten, its
-- last step staying in force.
-- @tparam table tb an open testbed
-- @tparam table|string steps as `check` takes them, or the path of a CSV
--   trace (`read_csv`)
-- @tparam[opt] table opts `direction` = "forward" (default: the client's
--   egress) | "reverse", `quiet` (boolean, default false)
-- @tparam function where (direction) -> ifname, netns, parent: the
--   testbed's netem place
-- @tparam[opt] table linkops with backend "link": `spec(spec)` -> the spec
--   with `limit_packets = "auto"` resolved as `tb:impair` resolves it, and
--   `failure()` -> nil, or message, "ELINKFAILED" when the link failed;
--   `retire(s)`: called with each schedule done, before it is forgotten
-- @treturn table a schedule (see `link`), already running; the testbed
--   stops it when it closes
-- @return or nil, message, CODE (a trace that cannot be read, a failed
--   first apply, the thread's start, a failed link's ELINKFAILED)
-- @raise at the caller's line, in this order: tb not an open testbed, bad
--   opts, a bad step (as `check`), a schedule still running on the
--   direction; messages name qoslab.Testbed:schedule
function M.testbed(tb, steps, opts, where, linkops)
  local s, msg, code = testbed_impl(2, tb, steps, opts, where, linkops)
  return s, msg, code
end

return M
