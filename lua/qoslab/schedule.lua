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
    local ok, canon = pcall(netem().check, spec, ctx)
    if not ok then
      -- netem's message, every "spec." in it (the field, and a cross-field
      -- rule's other field) naming this step instead
      local msg = tostring(canon):gsub('^' .. pat(ctx) .. ': ', '', 1)
      msg = (' ' .. msg):gsub('([%s%(])spec([%.:])', '%1' .. field:gsub('%%', '%%%%') .. '%2'):sub(2)
      error(ctx .. ': ' .. msg, 2)
    end
    if backend == 'link' and canon.limit_packets == 'auto' then
      error(string.format('%s: %s.limit_packets: "auto" is kernel netem\'s (sized from the device); '
        .. 'with backend = "link" give a number of packets', ctx, field), 2)
    end
    out[i] = { at_s = at, spec = canon }
  end
  return out
end

-- The lines of a file, one at a time (a reader that stops early reads no
-- further): an iterator giving line number and line (without a trailing
-- CR), and a function closing the file; or nil, message, "ENOENT".
local function read_lines(ctx, path)
  check.string(ctx, 'path', path)
  local f, msg = io.open(path, 'r')
  if not f then return nil, string.format('%s: cannot open %s', ctx, msg), 'ENOENT' end
  local ln = 0
  local it = f:lines()
  return function()
    local line = it()
    if line == nil then return nil end
    ln = ln + 1
    return ln, (line:gsub('\r$', ''))
  end, function() f:close() end
end

local function cell_value(s)
  if s == 'true' then return true end
  if s == 'false' then return false end
  local n = tonumber(s)
  if n ~= nil then return n end
  return s
end

local csv_steps

--- Read a CSV trace into steps. The first line is the header: `time_s`
-- first, then any of `qoslab.netem`'s top-level spec keys (e.g.
-- `time_s,delay_ms,loss_pct,rate_bps`); every further line is a step from
-- `time_s` on. An empty cell leaves that key out of the step (off); numbers
-- are read with `tonumber`, `true`/`false` as booleans, anything else as a
-- string (a distribution name). Blank lines and lines starting with `#` are
-- skipped. The steps are not checked here: `check` (and every schedule
-- function) does that, naming `steps[i]` = the i-th data line.
-- @tparam string path the file
-- @treturn table steps `{{at_s =, <key> = value, ...}, ...}`
-- @return or nil, message, "ENOENT" (cannot open) | "EINVAL" (a malformed
--   line: the message names the file, line and column; more than
--   `MAX_STEPS` data lines: it names the first line past the bound)
-- @usage local steps = assert(schedule.read_csv('path.csv'))
function M.read_csv(path)
  local ctx = 'qoslab.schedule.read_csv'
  local lines, close_or_msg, code = read_lines(ctx, path)
  if not lines then return nil, close_or_msg, code end
  local steps, msg
  steps, msg, code = csv_steps(ctx, path, lines)
  close_or_msg()
  return steps, msg, code
end

-- read_csv's parser over the lines of read_lines.
function csv_steps(ctx, path, lines)
  local head, steps = nil, {}
  for ln, line in lines do
    if line:match('^%s*$') or line:match('^%s*#') then goto continue end
    local cells = {}
    for c in (line .. ','):gmatch('([^,]*),') do cells[#cells + 1] = c:match('^%s*(.-)%s*$') end
    if not head then
      if cells[1] ~= 'time_s' then
        return nil, string.format('%s: %s:%d: expected a header starting with time_s, got %q', ctx,
          path, ln, line), 'EINVAL'
      end
      head = cells
      for j = 2, #head do
        if not head[j]:match('^[%a_][%w_]*$') or head[j] == 'at_s' then
          return nil, string.format('%s: %s:%d: column %d: expected a spec key, got %q', ctx, path,
            ln, j, head[j]), 'EINVAL'
        end
      end
    else
      if #cells ~= #head then
        return nil, string.format('%s: %s:%d: expected %d columns as the header, got %d', ctx, path,
          ln, #head, #cells), 'EINVAL'
      end
      local t = tonumber(cells[1])
      if not t then
        return nil, string.format('%s: %s:%d: time_s: expected a number, got %q', ctx, path, ln,
          cells[1]), 'EINVAL'
      end
      if #steps == M.MAX_STEPS then
        return nil, string.format('%s: %s:%d: expected at most %d steps (data lines; '
          .. 'qoslab.schedule.MAX_STEPS), got more', ctx, path, ln, M.MAX_STEPS), 'EINVAL'
      end
      local step = { at_s = t }
      for j = 2, #head do
        if cells[j] ~= '' then step[head[j]] = cell_value(cells[j]) end
      end
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
        return nil, string.format('%s: %s:%d: expected an integer of ms, got %q', ctx, path, ln, line),
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
-- @tparam string path the file
-- @tparam table opts
--   * `duration_s` (number in (0, 1e6], required): how long to replay (the
--     trace loops); at most `MAX_STEPS` windows (10000 s of 100 ms windows)
--   * `window_ms` (integer 1..60000, default 100)
--   * `spec` (table, default {}): other spec keys every step carries (e.g.
--     `{delay_ms = 20}`); its `rate_bps` is overridden
-- @treturn table steps `{{at_s =, rate_bps =, ...}, ...}` (a window without
--   an opportunity gets `MIN_RATE_BPS`)
-- @return or nil, message, "ENOENT" | "EINVAL" (a line that is not a
--   non-negative integer, times that decrease, or a trace whose last time is 0)
-- @raise on bad opts, naming the field (`opts.duration_s` also when its
--   windows would be more than `MAX_STEPS`)
-- @usage local steps = assert(schedule.read_mahimahi('cell.up', {duration_s = 10}))
function M.read_mahimahi(path, opts)
  local ctx = 'qoslab.schedule.read_mahimahi'
  check.table(ctx, 'opts', opts)
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
  local lines, close_or_msg, code = read_lines(ctx, path)
  if not lines then return nil, close_or_msg, code end
  local ks, msg
  ks, msg, code = mahimahi_times(ctx, path, lines)
  close_or_msg()
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

-- Start the C schedule: kind "netem"|"link", target as core.schedule_start
-- takes it, canonical steps, the wire spec of each.
local function start(kind, target, steps, wires, quiet)
  local at = {}
  for i, s in ipairs(steps) do at[i] = s.at_s end
  -- the monotonic time its step times count from (within the start call)
  local t0 = core.now()
  local c, msg, code = core.schedule_start(kind, target, at, wires)
  if not c then return nil, msg, code end
  return setmetatable({ _core = c, steps = steps, kind = kind, quiet = quiet, _warned = {},
    _wires = wires, _t0 = t0 }, Schedule)
end

local OPT_KEYS = { quiet = true, direction = true }

--- Run steps on the native impairment link (`qoslab.link.impair_link`):
-- each step is the link's atomic spec swap for one direction.
-- @tparam userdata link an open `qoslab.ImpairLink`
-- @tparam table steps as `check` takes them (or `read_csv`/`read_mahimahi` give)
-- @tparam[opt] table opts `direction` = "forward" (default) | "reverse",
--   `quiet` (boolean: no stderr line for a failed change)
-- @treturn table a schedule (methods `changes`, `lag`, `failed`, `wait`,
--   `stop`, `close`, `attach`), already running
-- @return or nil, message, CODE (the thread could not start)
-- @raise on a bad step (as `check`, with backend "link"), a closed link or
--   one that already runs a schedule
-- @usage local s = schedule.link(l, {{at_s = 0, delay_ms = 10}, {at_s = 2, delay_ms = 100}})
function M.link(link, steps, opts)
  local ctx = 'qoslab.schedule.link'
  opts = opts or {}
  check.table(ctx, 'opts', opts)
  check.keys(ctx, 'opts', opts, OPT_KEYS, 2)
  local dir = opts.direction or 'forward'
  if dir ~= 'forward' and dir ~= 'reverse' then
    check.fail(ctx, 'opts.direction', '"forward" or "reverse"', dir)
  end
  local canon = check.call(2, M.check, steps, ctx, 'link')
  local wires = {}
  for i, s in ipairs(canon) do wires[i] = s.spec end
  return start('link', { link = link, direction = dir }, canon, wires, opts.quiet)
end

--- Run steps on a kernel netem (`qoslab.netem.schedule` is this function).
-- Each step is resolved as `qoslab.netem.apply` resolves a spec
-- (`limit_packets = "auto"` sized for the step, `keep_order` turned into a
-- rate) before the first runs; each is then one atomic replace of the netem.
-- If no netem is there yet, the first step's spec is applied at once through
-- `qoslab.netem.apply` (so the qdisc is known to cleanup), and again at its time.
-- @tparam string ifname device
-- @tparam table steps as `check` takes them
-- @tparam[opt] table opts `netns`, `parent`, `handle` (as `qoslab.netem.apply`;
--   egress only), `quiet`
-- @treturn table a schedule (see `link`), already running
-- @return or nil, message, CODE: that of the first apply (ENODEV, EPERM, ...)
--   or of the thread's start
-- @raise on a bad step, naming `steps[i].<field>`, or bad opts
-- @usage local s = netem.schedule('veth0', {{at_s = 0, delay_ms = 20}, {at_s = 5, delay_ms = 200, loss_pct = 1}})
function M.netem(ifname, steps, opts)
  local ctx = 'qoslab.netem.schedule'
  opts = opts or {}
  check.table(ctx, 'opts', opts)
  local nopts = {}
  for k, v in pairs(opts) do if k ~= 'quiet' then nopts[k] = v end end
  if nopts.direction ~= nil and nopts.direction ~= 'egress' then
    check.fail(ctx, 'opts.direction', '"egress" (a schedule replaces an egress netem)', nopts.direction)
  end
  local canon = check.call(2, M.check, steps, ctx)
  local N = netem()
  local wires = {}
  for i, s in ipairs(canon) do
    local w, o = check.call(2, core.netem_check, ctx, 'apply', ifname, s.spec, nopts)
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
  local have, msg, code = N.get(ifname, nopts)
  if have == nil and msg then return nil, msg, code end
  if have == nil then
    local ok, m2, c2 = N.apply(ifname, steps[1] and canon[1].spec, { netns = nopts.netns,
      parent = nopts.parent, handle = nopts.handle, quiet = opts.quiet })
    if not ok then return nil, m2, c2 end
  end
  return start('netem', { ifname = ifname, netns = nopts.netns, parent = nopts.parent,
    handle = nopts.handle }, canon, wires, opts.quiet)
end

--- Run steps on one direction of a testbed while tests run
-- (`qoslab.Testbed:schedule` is this function): on the native link with
-- backend "link", else on the netem at the place `tb:impair` uses.
-- @tparam table tb an open testbed
-- @tparam table|string steps as `check` takes them, or the path of a CSV
--   trace (`read_csv`)
-- @tparam[opt] table opts `direction` = "forward" (default: the client's
--   egress) | "reverse", `quiet`
-- @tparam function where (direction) -> ifname, netns, parent: the
--   testbed's netem place
-- @tparam[opt] table linkops with backend "link": `spec(spec)` -> the spec
--   with `limit_packets = "auto"` resolved as `tb:impair` resolves it, and
--   `failure()` -> nil, or message, "ELINKFAILED" when the link failed
-- @treturn table a schedule (see `link`), already running; the testbed
--   stops it when it closes
-- @return or nil, message, CODE (a trace that cannot be read, a failed
--   first apply, the thread's start, a failed link's ELINKFAILED)
-- @raise as `link` / `netem`, naming qoslab.Testbed:schedule
function M.testbed(tb, steps, opts, where, linkops)
  local ctx = 'qoslab.Testbed:schedule'
  opts = opts or {}
  check.table(ctx, 'opts', opts, 2)
  check.keys(ctx, 'opts', opts, OPT_KEYS, 3)
  local dir = opts.direction or 'forward'
  if dir ~= 'forward' and dir ~= 'reverse' then
    check.fail(ctx, 'opts.direction', '"forward" or "reverse"', dir, 2)
  end
  if type(steps) == 'string' then
    local st, msg, code = M.read_csv(steps)
    if not st then return nil, msg, code end
    steps = st
  end
  -- the testbed sizes "auto" for its link (linkops.spec), as tb:impair does
  local canon = check.call(2, M.check, steps, ctx, not (linkops and linkops.spec) and tb.backend or nil)
  local s, msg, code
  if tb._link then
    if linkops and linkops.failure then
      local fmsg, fcode = linkops.failure()
      if fmsg then return nil, fmsg, fcode end
    end
    local wires = {}
    for i, c in ipairs(canon) do wires[i] = linkops and linkops.spec and linkops.spec(c.spec) or c.spec end
    s, msg, code = start('link', { link = tb._link, direction = dir }, canon, wires, opts.quiet)
  else
    local ifname, ns, parent = where(dir)
    local ok
    ok, s, msg, code = pcall(M.netem, ifname, steps, { netns = ns, parent = parent, quiet = opts.quiet })
    if not ok then error((tostring(s):gsub('^qoslab%.netem%.schedule', ctx, 1)), 2) end
  end
  if not s then return nil, msg, code end
  s._direction = dir
  tb._schedules = tb._schedules or {}
  tb._schedules[#tb._schedules + 1] = s
  return s
end

return M
