--- bench/ceiling/lib.lua - the arithmetic of bench/ceiling.lua, free of
-- processes and sockets so that a spec can check it on known inputs: the
-- bare programs' result line, best of N, ratios, CPU seconds per GB, Jain's
-- fairness index, the 10 ms pacing windows against their target, and the
-- verdict of each row against its target.
local M = {}

--- Keys every bare program's line carries (bench/ceiling/common.h).
M.LINE_KEYS = { 'path', 'bytes', 'datagrams', 'seconds', 'tx_cpu_s', 'rx_cpu_s' }

--- Parse one "ceiling KEY=VALUE ..." line of a bare program.
-- @tparam string line
-- @treturn table|nil the fields (numbers as numbers, `windows` as a list of
--   integers, `path` as a string), or nil, message naming what is wrong
function M.parse_line(line)
  if type(line) ~= 'string' then return nil, 'expected a string line' end
  local body = line:match('^ceiling (.-)%s*$')
  if not body then return nil, 'not a ceiling line: ' .. line:sub(1, 80) end
  local t = {}
  for word in body:gmatch('%S+') do
    local k, v = word:match('^([%a_][%w_]*)=(.*)$')
    if not k then return nil, 'field without KEY=VALUE: ' .. word end
    if k == 'windows' then
      local w = {}
      for x in v:gmatch('[^,]+') do
        local n = math.tointeger(tonumber(x))
        if not n then return nil, 'windows: expected integers, got ' .. x end
        w[#w + 1] = n
      end
      t[k] = w
    elseif k == 'path' then
      t[k] = v
    else
      local n = tonumber(v)
      if not n then return nil, k .. ': expected a number, got ' .. v end
      t[k] = math.tointeger(n) or n
    end
  end
  for _, k in ipairs(M.LINE_KEYS) do
    if t[k] == nil then return nil, 'missing field ' .. k end
  end
  return t
end

--- Jain's fairness index (sum x)^2 / (n * sum x^2) of a list of
-- non-negative shares: 1 when all are equal, 1/n when one takes all.
-- @tparam {number,...} xs
-- @treturn number|nil nil for an empty list or all zeros
function M.jain(xs)
  local s, s2 = 0.0, 0.0
  -- in floats: byte counts squared overflow Lua's integers
  for _, x in ipairs(xs) do
    x = x + 0.0
    s, s2 = s + x, s2 + x * x
  end
  if #xs == 0 or s2 == 0 then return nil end
  return s * s / (#xs * s2)
end

--- a / b, nil unless both are numbers and b > 0.
function M.ratio(a, b)
  if type(a) ~= 'number' or type(b) ~= 'number' or b ~= b or b <= 0 then return nil end
  return a / b
end

--- CPU seconds per GB (1e9 bytes) moved.
function M.cpu_s_per_gb(cpu_s, bytes)
  if type(cpu_s) ~= 'number' or type(bytes) ~= 'number' or bytes ~= bytes or bytes <= 0 then
    return nil
  end
  return cpu_s / (bytes / 1e9)
end

--- The run with the largest `value` of a list of runs ({value = ...}; runs
-- without a value are skipped).
-- @treturn table|nil
function M.best(runs)
  local b
  for _, r in ipairs(runs or {}) do
    if type(r.value) == 'number' and (not b or r.value > b.value) then b = r end
  end
  return b
end

--- Deviation of each window from the target rate, in percent.
-- @tparam {integer,...} windows payload bytes per window
-- @tparam number window_ms
-- @tparam number target_bps
-- @treturn {number,...}
function M.window_dev_pct(windows, window_ms, target_bps)
  local per = target_bps / 8 * window_ms / 1e3
  local d = {}
  for i, b in ipairs(windows) do d[i] = 100 * (b / per - 1) end
  return d
end

--- Judge a paced run's windows: the steady part before a stall (if any) and
-- the part after it. The first window (the flow's start, partial) and the
-- last (partial) are left out. A stall is the longest run of windows below
-- half the target; it must be at least `min_stall_windows` long (default 10)
-- to count.
-- @tparam {integer,...} windows payload bytes per window
-- @tparam number window_ms
-- @tparam number target_bps
-- @tparam[opt] number tol_pct the steady tolerance, default 5
-- @treturn table `steady = {n, within, worst_pct}` (worst: largest
--   absolute deviation), `stall_windows` (0 without a stall), `after =
--   {n, max_pct, above}` (the largest positive deviation after the stall and
--   how many windows exceed +10 %), nil when there was no stall
function M.pace_verdict(windows, window_ms, target_bps, tol_pct, min_stall_windows)
  tol_pct = tol_pct or 5
  min_stall_windows = min_stall_windows or 10
  local dev = M.window_dev_pct(windows, window_ms, target_bps)
  local n = #dev
  -- the longest run of windows under half the target, inside (2, n-1)
  local s0, s1, best = nil, nil, 0
  local i = 2
  while i <= n - 1 do
    if dev[i] < -50 then
      local j = i
      while j + 1 <= n - 1 and dev[j + 1] < -50 do j = j + 1 end
      if j - i + 1 > best then s0, s1, best = i, j, j - i + 1 end
      i = j + 1
    else
      i = i + 1
    end
  end
  if best < min_stall_windows then s0, s1, best = nil, nil, 0 end
  local steady = { n = 0, within = 0, worst_pct = 0 }
  local last_steady = s0 and s0 - 1 or n - 1
  -- the window the stall begins in is partial too
  if s0 then last_steady = s0 - 2 end
  for k = 2, last_steady do
    steady.n = steady.n + 1
    if math.abs(dev[k]) <= tol_pct then steady.within = steady.within + 1 end
    if math.abs(dev[k]) > math.abs(steady.worst_pct) then steady.worst_pct = dev[k] end
  end
  local after
  if s1 then
    after = { n = 0, max_pct = -100, above = 0 }
    -- from the window the sender resumes in (partial: it may only be low)
    for k = s1 + 1, n - 1 do
      after.n = after.n + 1
      if dev[k] > after.max_pct then after.max_pct = dev[k] end
      if dev[k] > 10 then after.above = after.above + 1 end
    end
  end
  return { steady = steady, stall_windows = best, after = after }
end

--- Format a number with `digits` decimals, or 'n/a'.
function M.fmt(x, digits)
  if type(x) ~= 'number' or x ~= x then return 'n/a' end
  return string.format('%.' .. (digits or 2) .. 'f', x)
end

--- Cores a link of `rate_bps` would keep busy at `s_per_gb` CPU seconds per GB.
function M.cores_at(rate_bps, s_per_gb)
  if type(s_per_gb) ~= 'number' then return nil end
  return rate_bps / 8 / 1e9 * s_per_gb
end

return M
