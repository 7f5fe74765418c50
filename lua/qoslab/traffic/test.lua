--- The test object of `qoslab.client`: pending until started or read, then
-- a live handle or the result table (see qoslab.traffic for the rules).
-- @module qoslab.traffic.test
local check = require 'qoslab.check'
local latency = require 'qoslab.latency'
local summary = require 'qoslab.traffic.summary'
local result = require 'qoslab.traffic.result'
local as_result = result.as_result

local M = {}

local core = check.core
-- opts and probe opts are the façade's raw copies (no metatable)
local copy = check.raw_copy

-- ------------------------------------------------------------- client ----

-- Private state of Test objects, so their raw table stays empty until it
-- becomes the result. mode: "pending" | "running" | "done".
local priv = setmetatable({}, { __mode = 'k' })

local Test = { __name = 'qoslab.Test' }
local methods = {}

-- A pending test that fails while being read cannot return nil, msg, code:
-- raise with the code in the message instead.
local function raise_failure(ctx, msg, code)
  error(string.format('%s: %s (%s)', ctx, tostring(msg), tostring(code or 'EFAIL')), 4)
end

-- The watch of the impairment link of the testbed the test runs in (its
-- netns), or nil: qoslab.testbed's, when that module is loaded.
local function link_watch(opts)
  local tbm = package.loaded['qoslab.testbed']
  if type(tbm) ~= 'table' or not tbm._link_watch then return nil end
  return tbm._link_watch(opts.netns)
end

-- Wait until CLOCK_MONOTONIC reaches p.start_at (ns), with the precise
-- sleep; records when the test starts (p.started_ns, p.start_late_ns).
-- A signal during the wait raises the interruption, as a running test's.
local function wait_start(p)
  local c = core()
  local target = p.start_at
  while c.now_ns() < target do
    -- the sleep takes seconds: aim 1 ns past, so the rounding never wakes it early
    local ok, msg, code = c.sleep_until((target + 1) / 1e9)
    if not ok then
      if code == 'EINTR' and c.signal_pending() then error(c.interruption(), 0) end
      if code == 'EINTR' then error('interrupted!', 0) end
      return nil, msg, code
    end
  end
  p.started_ns = c.now_ns()
  p.start_late_ns = p.started_ns - target
  return true
end

-- Start the C test; returns true or nil, msg, code.
local function begin(p)
  -- what this host refuses (CPUs, namespace, device, congestion control)
  -- first: before the delayed start, the probe and any connection
  local good, hmsg, hcode = core().traffic_client_host_check(copy(p.opts))
  if not good then
    p.mode = 'done'
    p.failure = { hmsg, hcode }
    return nil, hmsg, hcode
  end
  if p.start_at then
    local ok, msg, code = wait_start(p)
    if not ok then
      p.mode = 'done'
      p.failure = { msg, code }
      return nil, msg, code
    end
  end
  -- through a testbed's link that failed nothing can pass: say so at once
  -- rather than after the control connection's timeouts
  p.watch = link_watch(p.opts)
  if p.watch then
    local msg, code = p.watch()
    if msg then
      p.mode = 'done'
      p.failure = { msg, code }
      return nil, msg, code
    end
  end
  if p.probe then
    -- the probe first: its failure (no responder) costs no test, and its
    -- idle phase comes before the load
    local pr, msg, code = latency.start_beside(p.probe.opts, p.filled, p.probe.filled)
    if not pr then
      p.mode = 'done'
      p.failure = { msg, code }
      return nil, msg, code
    end
    p.probe.ud = pr
  end
  local ud, msg, code = core().traffic_client(copy(p.opts))
  if not ud then
    if p.probe then p.probe.ud:stop() end
    p.mode = 'done'
    p.failure = { msg, code }
    return nil, msg, code
  end
  p.ud = ud
  p.mode = 'running'
  return true
end

local function finish(p)
  if p.result or p.failure then return end
  local dead
  if p.watch then
    -- wait as :wait() does (draining the live records), watching
    -- the link: when it fails the test ends at once, without the results
    -- exchange that a dead path cannot carry
    while not dead do
      local iv = p.ud:next_interval(0.2)
      if iv == false then break end
      dead = p.watch() and { p.watch() }
      if dead then p.ud:abort() end
    end
  end
  local res, msg, code = p.ud:wait()
  if p.watch and not dead then dead = p.watch() and { p.watch() } end
  if dead then res, msg, code = nil, dead[1], dead[2] end
  if p.probe then
    if res then
      res, msg, code = latency.finish_beside(p.probe.ud, p.probe.filled, res)
    else
      p.probe.ud:stop()
    end
  end
  if res then
    p.result = as_result(res, p.opts)
    if p.probe then p.result.options.probe = copy(p.probe.opts) end
    if p.start_at then
      p.result.options.start_at_mono_ns = p.start_at
      p.result.start_late_ns = p.start_late_ns
      p.result.started_mono_ns = p.started_ns
    end
  else
    p.failure = { msg, code }
  end
  p.mode = 'done'
end

-- The private state of a Test method's self: a call with '.' instead of ':'
-- (self not a qoslab.Test) raises at the method's caller.
local function state(self, method)
  local p = priv[self]
  if not p then
    error(string.format('qoslab.Test:%s: expected a qoslab.Test as self (call it as h:%s(...)), got %s',
      method, method, type(self)), 3)
  end
  return p
end

-- Run a pending test and turn the object into its result table.
local function materialize(self)
  local p = priv[self]
  if p.mode == 'pending' then
    local ok, msg, code = begin(p)
    if not ok then raise_failure('qoslab.client', msg, code) end
  end
  finish(p)
  if p.failure then raise_failure('qoslab.client', p.failure[1], p.failure[2]) end
  priv[self] = nil
  for k, v in pairs(p.result) do rawset(self, k, v) end
  setmetatable(self, result.Result)
end

Test.__index = function(self, k)
  local p = priv[self]
  if p.mode == 'pending' then
    if k == 'start' then return methods.start end
    materialize(self)
    return rawget(self, k)
  end
  local m = methods[k]
  if m then return m end
  error(string.format("qoslab.Test: field '%s' of a started test: call :wait() for the result",
    tostring(k)), 2)
end
Test.__pairs = function(self)
  if priv[self] and priv[self].mode == 'pending' then materialize(self) end
  return next, self, nil
end
Test.__len = function(self)
  if priv[self] and priv[self].mode == 'pending' then materialize(self) end
  return rawlen(self)
end
Test.__tostring = function(self)
  local p = priv[self]
  if p.mode == 'pending' then
    materialize(self)
    return summary.summary(self)
  end
  local o = p.filled
  return string.format('qoslab.Test (%s, %s %s:%d)', p.mode, o.proto,
    tostring(o.host):find(':', 1, true) and ('[' .. o.host .. ']') or o.host, o.port)
end
-- A handle going out of scope stops its test (the C object also stops on GC).
Test.__close = function(self)
  local p = priv[self]
  if p and p.mode == 'running' and p.ud then p.ud:stop() end
  if p and p.probe and p.probe.ud then p.probe.ud:stop() end
end

--- Start a pending test (from `client{...}`) and return it as a live handle.
-- The handle has `:intervals()`, `:next_interval(timeout_s)`, `:wait()` and
-- `:stop()`; it is to-be-closed (closing stops the test and its probe).
-- With a `probe`, this first starts the probe, waits for its first reply
-- and its `idle_s` (default 2 s), then starts the load; `:wait()` probes
-- `idle_s` more after the load before it returns the result.
-- @treturn qoslab.Test the same object, now running; or nil, message, CODE
--   (checked first, before a delayed start, the probe or any connection:
--   ENOTSUP or EPERM for a congestion control this kernel or user cannot
--   use, EINVAL for a `cpu_affinity` CPU this process may not run on, a
--   missing namespace's ENOENT, ENODEV for a `bind_device` that namespace
--   lacks; then ENOMEM or EAGAIN; the probe's ECONNREFUSED, EPROTONOSUPPORT,
--   ETIMEDOUT, EACCES (see `qoslab.latency.probe`); ECONNREFUSED and the
--   other failures of a running test come from `:wait()`)
-- @usage local h <close> = qoslab.client{host = '127.0.0.1'}:start()
function methods.start(self)
  local p = state(self, 'start')
  if p.mode ~= 'pending' then
    error('qoslab.Test:start: the test was already started', 2)
  end
  local ok, msg, code = begin(p)
  if not ok then return nil, msg, code end
  return self
end

-- A live interval of a test with a probe gets `latency` (the replies in so
-- far: qoslab.latency.interval_live).
local function with_latency(p, iv)
  if iv and p.probe and p.probe.ud then
    iv.latency = latency.interval_live(p.probe.ud, p.ud:start_time_unix_s(), iv)
  end
  return iv
end

--- Next live interval report.
-- Against a qoslab server a record holds both ends' entries of its grid
-- slot, as `res.intervals[k]` will: it waits for the server's entries (at
-- most 300 ms + 2 x the control RTT after its end) and has `peer_missing =
-- true` when they did not come in time (they are then only in the final
-- result). Against iperf3 (nothing live) it holds this end's entries and
-- comes at once; `peer_missing` is absent.
-- @tparam[opt=1] number timeout_s how long to wait, seconds (>= 0)
-- @treturn table|false|nil an interval table (shape as in `res.intervals`,
--   plus `peer_missing`; with a probe, `latency` holds the replies in so
--   far), false when the test is over, nil on timeout
function methods:next_interval(timeout_s)
  local p = state(self, 'next_interval')
  timeout_s = check.number('qoslab.Test:next_interval', 'timeout_s', timeout_s, 0, 86400, 1)
  if p.mode ~= 'running' then return false end
  return with_latency(p, p.ud:next_interval(timeout_s))
end

--- Iterate over interval reports as they happen; ends when the test ends.
-- @treturn function iterator yielding interval tables
-- @usage for iv in h:intervals() do print(iv.end_s, iv.sum.receiver.bits_per_second) end
function methods.intervals(self)
  local p = state(self, 'intervals')
  return function()
    while p.mode == 'running' do
      if p.watch and p.watch() then p.ud:abort() end
      local iv = p.ud:next_interval(0.5)
      if iv then return with_latency(p, iv) end
      if iv == false then return nil end
    end
    return nil
  end
end

--- What the running test set up, as its result will hold it: `cookie`,
-- `tcp_mss_bytes` (TCP: the control connection's MSS), `tcp_congestion`
-- (TCP: this end's, e.g. `{ client = "cubic" }`), `streams[i]` with `id`,
-- `direction` and `socket` (see manual/results.md), and
-- `start_time_unix_s`. For what iperf3 prints when a test starts.
-- @treturn table|nil nil before the streams are set up (they are once an
--   interval came) and after the test ended
-- @usage for iv in h:intervals() do local s = h:setup() ... end
function methods.setup(self)
  local p = state(self, 'setup')
  if p.mode ~= 'running' then return nil end
  local s = p.ud:setup()
  if s then s.start_time_unix_s = p.ud:start_time_unix_s() end
  return s
end

--- Wait for the end of the test.
-- @treturn table the result table (same table on every call), or nil,
--   message, CODE when the test failed (the codes of `qoslab.traffic.run`)
function methods.wait(self)
  local p = state(self, 'wait')
  finish(p)
  if p.failure then return nil, p.failure[1], p.failure[2] end
  return p.result
end

--- End the test early; `wait()` still returns a result for the time run.
function methods.stop(self)
  local p = state(self, 'stop')
  if p.mode == 'running' then p.ud:stop() end
  return true
end

--- Close: stop if running (same as leaving a `<close>` scope).
function methods.close(self)
  state(self, 'close')
  Test.__close(self)
end

--- A pending test of checked options `opts` (the caller's copy).
-- @tparam table opts
-- @tparam table filled the options as the test runs them (what
--   `core.traffic_client_check` returns: the core's defaults filled in)
-- @tparam[opt] table probe `{ opts = the caller's probe table, filled = it
--   checked (qoslab.latency.check_beside) }`: a latency probe beside the test
-- @tparam[opt] integer start_at CLOCK_MONOTONIC ns the test waits for
--   before it starts (`opts.start_at_mono_ns`, checked by the façade)
-- @treturn qoslab.Test
function M.pending(opts, filled, probe, start_at)
  local t = setmetatable({}, Test)
  priv[t] = { opts = opts, filled = filled, mode = 'pending', probe = probe, start_at = start_at }
  return t
end

--- Run a test of checked options `opts` now.
-- @tparam table opts
-- @tparam table filled as for `pending`
-- @tparam[opt] table probe as for `pending`
-- @tparam[opt] integer start_at as for `pending`
-- @treturn table the result table, or nil, message, CODE (as `qoslab.traffic.run`)
function M.run(opts, filled, probe, start_at)
  local p = { opts = opts, filled = filled, mode = 'pending', probe = probe, start_at = start_at }
  local ok, msg, code = begin(p)
  if not ok then return nil, msg, code end
  finish(p)
  if p.failure then return nil, p.failure[1], p.failure[2] end
  return p.result
end

--- Start a test of checked options `opts` now.
-- @tparam table opts
-- @tparam table filled as for `pending`
-- @tparam[opt] table probe as for `pending`
-- @tparam[opt] integer start_at as for `pending`
-- @treturn qoslab.Test running handle, or nil, message, CODE (as `Test:start`)
function M.start(opts, filled, probe, start_at)
  return methods.start(M.pending(opts, filled, probe, start_at))
end

return M
