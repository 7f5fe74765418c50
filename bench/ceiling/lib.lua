--- bench/ceiling/lib.lua - the arithmetic of bench/ceiling.lua, free of
-- processes and sockets so that a spec can check it on known inputs: the
-- bare programs' result line, best of N, ratios, CPU seconds per GB, Jain's
-- fairness index, the 10 ms pacing windows against their target, the
-- verdict of each row against its target, the measured reasons of a miss,
-- the note where the bare program is no ceiling, and the load warning.
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

--- The 1-minute load average of a /proc/loadavg text ("1.33 0.9 0.5 ...").
-- @treturn number|nil
function M.load1(text)
  return tonumber(type(text) == 'string' and text:match('^%s*(%S+)') or nil)
end

--- A warning when the 1-minute load average before or after the run exceeds
-- the cores: other work shared the CPUs, so the figures measure that too.
-- @tparam number|nil before 1-minute load average at the start
-- @tparam number|nil after at the end
-- @tparam integer ncpu cores
-- @treturn string|nil
function M.load_warning(before, after, ncpu)
  local hi = math.max(before or 0, after or 0)
  if not ncpu or hi <= ncpu then return nil end
  return string.format('**Warning: the 1-minute load average was %s before and %s after the run '
    .. 'on %d cores: other work shared the CPUs, so these figures (the ratios most of all) '
    .. 'are not reliable; run it again on a quiet host.**', M.fmt(before, 2), M.fmt(after, 2), ncpu)
end

-- Cores a run kept busy at one end: CPU seconds over the run's seconds.
local function cores(cpu_s, seconds)
  if type(cpu_s) ~= 'number' or type(seconds) ~= 'number' or seconds <= 0 then return nil end
  return cpu_s / seconds
end

--- The measured reasons a row of qoslab missed its target, from the run
-- itself: qoslab's CPU per GB at an end where it spends over 10 % more than
-- the program it missed against, an end that kept its threads' cores busy
-- (at least 90 % of min(streams, cores)), a host loaded above its cores,
-- and, for paced runs, the windows off target. Never empty: with no such
-- figure it says so.
-- @tparam table c `q` (qoslab's best run: tx_cpu_s, rx_cpu_s, bytes,
--   seconds), `refs` (list of `{name =, run =}` the row missed against),
--   `streams` (threads per end; default 1), `ncpu`, `load` (the highest
--   1-minute load average seen), `pace` (a pace_verdict, for a paced row),
--   `jain` (qoslab's index, for the rows of many streams or tests)
-- @treturn {string,...}
function M.miss_reasons(c)
  if not c.q then return { 'no qoslab result in this run (its error is on the bench\'s stderr)' } end
  local why = {}
  local q = c.q
  for _, e in ipairs { { 'rx_cpu_s', 'receiver' }, { 'tx_cpu_s', 'sender' } } do
    local mine, vs = M.cpu_s_per_gb(q[e[1]], q.bytes), {}
    for _, ref in ipairs(c.refs or {}) do
      local r = ref.run or {}
      local theirs = M.cpu_s_per_gb(r[e[1]], r.bytes)
      if mine and theirs and mine > 1.1 * theirs then
        vs[#vs + 1] = ref.name .. ' ' .. M.fmt(theirs, 3)
      end
    end
    if #vs > 0 then
      why[#why + 1] = string.format('%s CPU s/GB %s vs %s', e[2], M.fmt(mine, 3),
        table.concat(vs, ', '))
    end
  end
  local busy = math.min(c.streams or 1, c.ncpu or 1)
  for _, e in ipairs { { 'tx_cpu_s', 'sender' }, { 'rx_cpu_s', 'receiver' } } do
    local n = cores(q[e[1]], q.seconds)
    if n and n >= 0.9 * busy then
      why[#why + 1] = busy == 1 and string.format('%s CPU-bound: %s of a core', e[2], M.fmt(n, 2))
        or string.format('%s CPU-bound: %s of %d cores', e[2], M.fmt(n, 2), busy)
    end
  end
  if c.jain and c.jain < 0.9 then
    why[#why + 1] = string.format('unfair shares: Jain %s', M.fmt(c.jain, 3))
  end
  local loaded = c.load and c.ncpu and c.load > c.ncpu
  if c.pace then
    local st = c.pace.steady
    if st.n > st.within then
      why[#why + 1] = string.format('windows late: %d of %d off by more than 5 %% (worst %+.1f %%)%s',
        st.n - st.within, st.n, st.worst_pct,
        loaded and string.format(', host load %s', M.fmt(c.load, 1)) or '')
      loaded = false
    end
    if c.pace.after and c.pace.after.above > 0 then
      why[#why + 1] = string.format('burst after the stall: %d window%s above +10 %% (highest %+.1f %%)',
        c.pace.after.above, c.pace.after.above == 1 and '' or 's', c.pace.after.max_pct)
    elseif not c.pace.after then
      why[#why + 1] = 'no stall seen in the arrivals'
    end
  end
  if loaded then
    why[#why + 1] = string.format('host load %s on %d cores', M.fmt(c.load, 1), c.ncpu)
  end
  if #why == 0 then
    why[1] = 'no cause in this run\'s figures (CPU per GB within 10 % of the reference, no end '
      .. 'CPU-bound, load below the cores)'
  end
  return why
end

--- The note for a row where qoslab beats the bare program by more than 5 %:
-- the bare program is then no ceiling in this run, and the note says which
-- of its own figures show why where the run shows it.
-- @tparam number|nil rb qoslab / bare
-- @tparam table|nil q qoslab's best run
-- @tparam table|nil b the bare program's best run
-- @tparam[opt] number load the highest 1-minute load average
-- @tparam[opt] integer ncpu
-- @treturn string|nil nil when qoslab / bare <= 1.05
function M.ceiling_note(rb, q, b, load, ncpu)
  if not rb or rb <= 1.05 then return nil end
  local see = {}
  q, b = q or {}, b or {}
  for _, e in ipairs { { 'tx_cpu_s', 'sender' }, { 'rx_cpu_s', 'receiver' } } do
    local n = cores(b[e[1]], b.seconds)
    if n and n >= 0.9 then
      see[#see + 1] = string.format('bare\'s %s used %s of a core', e[2], M.fmt(n, 2))
    end
    local mine, theirs = M.cpu_s_per_gb(q[e[1]], q.bytes), M.cpu_s_per_gb(b[e[1]], b.bytes)
    if mine and theirs and theirs > 1.1 * mine then
      see[#see + 1] = string.format('bare\'s %s CPU s/GB %s vs qoslab %s', e[2], M.fmt(theirs, 3),
        M.fmt(mine, 3))
    end
  end
  if load and ncpu and load > ncpu then
    see[#see + 1] = string.format('host load %s on %d cores', M.fmt(load, 1), ncpu)
  end
  if #see == 0 then see[1] = 'the CPU per GB table below; best of N runs only' end
  return string.format('bare below qoslab in this run (qoslab/bare %s): not a ceiling here; see %s',
    M.fmt(rb, 2), table.concat(see, ', '))
end

return M
