--- Monotonic time, sleeps, periodic timers and deadlines.
--
-- All times are CLOCK_MONOTONIC (clock_gettime(2)) in seconds as floats with
-- nanosecond resolution; periodic timers use timerfd(2) with absolute
-- expirations, so tick k falls at start + k * period and never drifts.
-- @module qoslab.timer
local core = require 'qoslab.core'
local check = require 'qoslab.check'

local M = {}

--- Monotonic time now.
-- @treturn number seconds since an arbitrary origin (CLOCK_MONOTONIC)
-- @usage local t0 = timer.now()
M.now = core.now

--- Monotonic time now in integer nanoseconds.
-- @treturn integer nanoseconds (CLOCK_MONOTONIC)
M.now_ns = core.now_ns

--- Wall-clock time now in integer nanoseconds since the Unix epoch
-- (CLOCK_REALTIME: it steps when the clock is set; for intervals use now_ns).
-- @treturn integer nanoseconds
M.realtime_ns = core.realtime_ns

--- Wait until a file descriptor reaches its end (a read of 0 bytes: the
-- writer of a pipe, e.g. an ssh channel, closed it) or `timeout_s` passed,
-- whichever is first, blocked in poll(2). Whatever the descriptor carries
-- meanwhile is read and dropped.
-- @tparam integer fd e.g. 0 for stdin
-- @tparam number timeout_s seconds, >= 0
-- @return true at the end, false when the timeout passed first; or nil,
--   message, CODE: "EINTR" when SIGINT/SIGTERM/SIGHUP arrived, "EBADF" when
--   fd is not open, another errno name when poll/read failed
-- @raise when fd is not an integer >= 0 or timeout_s not a finite number >= 0
-- @usage if timer.wait_eof(0, 0.1) then print('stdin closed') end
M.wait_eof = core.wait_eof

--- Sleep for a duration (clock_nanosleep, TIMER_ABSTIME on CLOCK_MONOTONIC).
-- @tparam number seconds duration in seconds, >= 0
-- @return true, or nil, message, "EINTR" when SIGINT/SIGTERM arrived
-- @raise when seconds is not a finite number >= 0
-- @usage timer.sleep(0.25)
M.sleep = core.sleep

--- Sleep until an absolute monotonic time.
-- @tparam number t_s deadline as returned by now()
-- @return true, or nil, message, "EINTR"
M.sleep_until = core.sleep_until

--- A periodic timer on an absolute grid (timerfd).
-- @tparam number period_s period in seconds, >= 1e-6
-- @tparam[opt] number start_s monotonic time of the first tick (default now + period)
-- @treturn qoslab.Periodic with `:wait()` (ticks expired since the last wait: 1 on
--   time, n > 1 when n - 1 were missed), `:next()`, `:missed()`, `:ticks()`, `:close()`;
--   to-be-closed.
-- @usage local tick <close> = timer.periodic(0.1); for i = 1, 10 do tick:wait() end
M.periodic = core.periodic

local Deadline = {}
Deadline.__index = Deadline
Deadline.__name = 'qoslab.Deadline'
function Deadline:remaining() return math.max(0, self.at_s - core.now()) end
function Deadline:expired() return core.now() >= self.at_s end
function Deadline:sleep() return core.sleep_until(self.at_s) end
function Deadline.__tostring(d)
  return string.format('qoslab.Deadline (%.6f s remaining)', d:remaining())
end

--- A deadline `seconds` from now.
-- @tparam number seconds >= 0
-- @treturn table deadline with `at_s`, `:remaining()` (s), `:expired()`, `:sleep()`
-- @usage local d = timer.deadline(5); while not d:expired() do ... end
function M.deadline(seconds)
  check.number('qoslab.timer.deadline', 'seconds', seconds, 0, 1e9)
  if seconds == nil then check.fail('qoslab.timer.deadline', 'seconds', 'a number', nil) end
  return setmetatable({ at_s = core.now() + seconds }, Deadline)
end

return M
