--- Experiment plans: sweeps over named parameters with repetitions, statistics,
-- a stop rule, hooks, progress, and results on disk that survive a kill -9.
--
-- A sweep visits points (a cartesian product of `params` in a stated order, or
-- an explicit list), runs each `repeat_count` times through a caller-supplied
-- `run` function, reduces each run to a number with `metric`, and summarises
-- the repetitions (mean, sample standard deviation, 95 % confidence interval
-- from Student's t). Each finished point is appended as one JSON line to
-- `out/results.jsonl` and the file is closed and synced before the next point
-- starts, so an interrupted sweep loses at most the point that was running;
-- `resume = true` skips the points already in the file.
--
-- This module runs nothing by itself: `run` does the measurement (usually with
-- `qoslab.testbed` and `qoslab.client`), which keeps it testable with fake runs.
-- @module qoslab.plan
local cjson = require 'cjson'
local check = require 'qoslab.check'
local fs = require 'qoslab.fs'

local M = {}

local CTX = 'qoslab.plan.sweep'

--- Statistics.
-- @section statistics

-- Two-sided 95 % quantiles t(0.975, df) for df = 1..30 (standard tables).
local T975 = {
  12.706204736, 4.302652730, 3.182446305, 2.776445105, 2.570581836,
  2.446911851, 2.364624252, 2.306004135, 2.262157163, 2.228138852,
  2.200985160, 2.178812830, 2.160368656, 2.144786688, 2.131449546,
  2.119905299, 2.109815578, 2.100922040, 2.093024054, 2.085963447,
  2.079613845, 2.073873068, 2.068657610, 2.063898562, 2.059538553,
  2.055529439, 2.051830516, 2.048407142, 2.045229642, 2.042272456,
}

--- Student's t quantile t(0.975, df): the 95 % two-sided factor.
-- Exact table for df 1–30; above, the Cornish–Fisher expansion around the
-- normal quantile (error < 1e-4 for df > 30).
-- @tparam integer df degrees of freedom, >= 1
-- @treturn number
-- @usage plan.t975(4) --> 2.7764...
function M.t975(df)
  if df == nil then check.fail('qoslab.plan.t975', 'df', 'an integer in [1, inf]', nil) end
  df = check.integer('qoslab.plan.t975', 'df', df, 1)
  if df <= 30 then return T975[df] end
  local z = 1.959963985
  local z3, z5 = z ^ 3, z ^ 5
  return z + (z3 + z) / (4 * df) + (5 * z5 + 16 * z3 + 3 * z) / (96 * df * df)
end

--- Summary statistics of repeated measurements.
-- @tparam {number,...} values the measurements (finite numbers)
-- @treturn table `{n, mean, stdev, ci95, ci_low, ci_high, min, max, values}`:
--   stdev is the sample standard deviation (n − 1); ci95 the half-width
--   t(0.975, n − 1) · stdev / √n. With n = 1, stdev/ci95/ci_low/ci_high are nil;
--   with n = 0 only n = 0 and values = {} are set.
-- @usage local s = plan.stats{10, 12, 14}  -- s.mean == 12, s.stdev == 2
function M.stats(values)
  check.table('qoslab.plan.stats', 'values', values)
  local n = #values
  local s = { n = n, values = { table.unpack(values) } }
  if n == 0 then return s end
  local sum, mn, mx = 0, math.huge, -math.huge
  for i = 1, n do
    local v = values[i]
    if type(v) ~= 'number' or v ~= v or v == math.huge or v == -math.huge then
      check.fail('qoslab.plan.stats', 'values[' .. i .. ']', 'a finite number', v)
    end
    sum = sum + v
    if v < mn then mn = v end
    if v > mx then mx = v end
  end
  local mean = sum / n
  s.mean, s.min, s.max = mean, mn, mx
  if n >= 2 then
    local ss = 0
    for i = 1, n do ss = ss + (values[i] - mean) ^ 2 end
    s.stdev = math.sqrt(ss / (n - 1))
    s.ci95 = M.t975(n - 1) * s.stdev / math.sqrt(n)
    s.ci_low, s.ci_high = mean - s.ci95, mean + s.ci95
  end
  return s
end

--- Points and keys.
-- @section points_and_keys

local function fmt_value(v)
  if math.type(v) == 'integer' then return tostring(v) end
  if type(v) == 'number' then
    if v == math.floor(v) and math.abs(v) < 2 ^ 53 then return string.format('%d', v) end
    return string.format('%.17g', v)
  end
  return tostring(v)
end

-- A point's parameters: a table of string name -> number|string|boolean.
-- level as in check.fail (1 = the caller of the function calling this).
local function check_params(ctx, field, params, level)
  check.table(ctx, field, params, level + 1)
  for k, v in pairs(params) do
    if type(k) ~= 'string' then
      check.fail(ctx, field .. ' key', 'a string (a parameter name)', k, level + 1)
    end
    local tv = type(v)
    if tv ~= 'number' and tv ~= 'string' and tv ~= 'boolean' then
      check.fail(ctx, field .. '.' .. k, 'a number, string or boolean', v, level + 1)
    end
  end
end

-- The key without argument checks (sweep's own points may hold any values).
--- Print a warning on stderr (replace to route warnings elsewhere).
-- @tparam string msg
function M.warn(msg)
  io.stderr:write('qoslab: warning: ', msg, '\n')
  io.stderr:flush()
end

local function key_of(params)
  local names = {}
  for k in pairs(params) do names[#names + 1] = k end
  table.sort(names)
  local parts = {}
  for i, k in ipairs(names) do parts[i] = k .. '=' .. fmt_value(params[k]) end
  return table.concat(parts, ',')
end

--- Canonical key of a point's parameters (sorted `name=value` pairs); 1 and 1.0
-- give the same key, so a point read back from JSON matches the one planned.
-- @tparam table params parameter name (string) -> number|string|boolean
-- @treturn string
-- @raise when params is not such a table, naming the offending entry
-- @usage plan.point_key{delay_ms = 10, loss_pct = 1} --> "delay_ms=10,loss_pct=1"
function M.point_key(params)
  check_params('qoslab.plan.point_key', 'params', params, 1)
  return key_of(params)
end

local function label(point, order)
  local parts = {}
  for i, k in ipairs(order) do parts[i] = k .. '=' .. fmt_value(point[k]) end
  return table.concat(parts, ' ')
end

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

-- A value that cannot name a point: NaN and inf are written as null in the
-- results file, so their point could never be found again on resume.
local function finite(v)
  return type(v) ~= 'number' or (v == v and v ~= math.huge and v ~= -math.huge)
end

-- params: name -> non-empty list of distinct values (no NaN or inf: two
-- values with the same key would share their records, and resume would
-- take one for the other); order: each name once (default the sorted
-- names). Fields are named with prefix ("" or "opts."). Returns order.
-- level as in check.fail.
local function check_product(ctx, params, order, level, prefix)
  local L = level + 1
  prefix = prefix or ''
  check.table(ctx, prefix .. 'params', params, L)
  local names = {}
  for k, v in pairs(params) do
    if type(k) ~= 'string' then
      check.fail(ctx, prefix .. 'params key', 'a string (a parameter name)', k, L)
    end
    local field = prefix .. 'params.' .. k
    if type(v) ~= 'table' or #v == 0 then
      check.fail(ctx, field, 'a non-empty list of values', v, L)
    end
    local first = {}
    for i = 1, #v do
      if not finite(v[i]) then check.fail(ctx, field .. '[' .. i .. ']', 'a finite number', v[i], L) end
      local key = fmt_value(v[i])
      if first[key] then
        error(string.format('%s: %s[%d]: expected a value not listed before, got %s (a duplicate of %s[%d])',
          ctx, field, i, check.describe(v[i]), field, first[key]), L + 1)
      end
      first[key] = i
    end
    names[#names + 1] = k
  end
  table.sort(names)
  if order == nil then return names end
  check.table(ctx, prefix .. 'order', order, L)
  local seen = {}
  for i, k in ipairs(order) do
    if type(k) ~= 'string' or params[k] == nil then
      check.fail(ctx, prefix .. 'order[' .. i .. ']', 'a name in ' .. prefix .. 'params', k, L)
    end
    if seen[k] then error(ctx .. ': ' .. prefix .. 'order: "' .. k .. '" listed twice', L + 1) end
    seen[k] = true
  end
  for _, k in ipairs(names) do
    if not seen[k] then error(ctx .. ': ' .. prefix .. 'order: parameter "' .. k .. '" missing', L + 1) end
  end
  return order
end

-- The product without argument checks (sweep has checked its options).
local function product_of(params, order)
  local out = {}
  local cur = {}
  local function rec(depth)
    if depth > #order then out[#out + 1] = copy(cur) return end
    local name = order[depth]
    for _, v in ipairs(params[name]) do
      cur[name] = v
      rec(depth + 1)
    end
    cur[name] = nil
  end
  if #order > 0 then rec(1) end
  return out
end

--- The points of a plan in visiting order (outer → inner).
-- @tparam table params name (string) -> non-empty list of distinct values
--   (no NaN or inf; 1 and 1.0 are the same value)
-- @tparam[opt] {string,...} order every parameter name once, outermost first
--   (default: the sorted names, as `sweep`)
-- @treturn {table,...} points (name -> value)
-- @raise when params or order is not of that shape, naming the entry
--   (`params.p[2]: expected a value not listed before, got 1 (a duplicate
--   of params.p[1])`), at the caller's line
-- @usage plan.product({a = {1, 2}, b = {'x'}}, {'a', 'b'})
function M.product(params, order)
  order = check_product('qoslab.plan.product', params, order, 1)
  return product_of(params, order)
end

-- Row of a point for the stop rule: every parameter but the innermost.
local function row_key(point, order)
  local r = {}
  for i = 1, #order - 1 do r[order[i]] = point[order[i]] end
  return key_of(r)
end

--- Results file.
-- @section results_file

local json = cjson.new()

-- Encoding is done here because Debian's lua-cjson caps number precision at 14
-- digits, and results must read back exactly: each float is written with the
-- fewest digits (15, 16 or 17) that give the same double back. Decoding uses
-- lua-cjson. NaN/inf become null; functions, userdata and cycles are dropped.
local function num_text(v)
  if math.type(v) == 'integer' then return string.format('%d', v) end
  if v ~= v or v == math.huge or v == -math.huge then return 'null' end
  for _, d in ipairs { 15, 16, 17 } do
    local t = string.format('%.' .. d .. 'g', v)
    if tonumber(t) == v then return t end
  end
  return string.format('%.17g', v)
end

local ESC = { ['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f',
              ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t' }
local function str_text(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return ESC[c] or string.format('\\u%04x', c:byte())
  end) .. '"'
end

local function encode_value(v, buf, seen)
  local tv = type(v)
  if tv == 'number' then buf[#buf + 1] = num_text(v)
  elseif tv == 'string' then buf[#buf + 1] = str_text(v)
  elseif tv == 'boolean' then buf[#buf + 1] = v and 'true' or 'false'
  elseif tv == 'table' and not seen[v] then
    seen[v] = true
    local n, count = #v, 0
    for _, e in pairs(v) do
      local te = type(e)
      if te ~= 'function' and te ~= 'userdata' and te ~= 'thread' then count = count + 1 end
    end
    if n > 0 and n == count then
      buf[#buf + 1] = '['
      for i = 1, n do
        if i > 1 then buf[#buf + 1] = ',' end
        encode_value(v[i], buf, seen)
      end
      buf[#buf + 1] = ']'
    else
      local keys = {}
      for k, e in pairs(v) do
        local te = type(e)
        if te ~= 'function' and te ~= 'userdata' and te ~= 'thread' and not seen[e] then
          keys[#keys + 1] = tostring(k)
        end
      end
      table.sort(keys)
      buf[#buf + 1] = '{'
      for i, k in ipairs(keys) do
        if i > 1 then buf[#buf + 1] = ',' end
        buf[#buf + 1] = str_text(k)
        buf[#buf + 1] = ':'
        local e = v[k]
        if e == nil then e = v[tonumber(k)] end
        encode_value(e, buf, seen)
      end
      buf[#buf + 1] = '}'
    end
    seen[v] = nil
  else
    buf[#buf + 1] = 'null'
  end
end

--- Encode a value as one JSON text: floats exactly (read back bit for bit),
-- NaN/inf as null, functions/userdata dropped, object keys sorted.
-- @param v value
-- @treturn string
-- @usage plan.encode{a = 0.1} --> '{"a":0.1}'
function M.encode(v)
  local buf = {}
  encode_value(v, buf, {})
  return table.concat(buf)
end

local function nulls_to_nil(v)
  if v == json.null then return nil end
  if type(v) == 'table' then
    for k, e in pairs(v) do v[k] = nulls_to_nil(e) end
  end
  return v
end

--- The most `load` reads of a results file: 1 GiB. A larger regular file
-- is refused from its size before it is read (EFBIG).
M.LOAD_MAX_BYTES = 1 << 30

-- The whole text of a regular file of at most max bytes, or nil, msg, CODE.
-- With the C module the file's type is checked before it is opened (a FIFO
-- would block the open, /dev/zero never end); without it (pure-Lua use) a
-- directory and an overlong file are still refused.
local function read_text(path, max, what)
  local ok, core = pcall(require, 'qoslab.core')
  if ok and type(core) == 'table' and core.read_regular_file then
    return core.read_regular_file(path, max, what)
  end
  local f, err, errno = io.open(path, 'r')
  if not f then
    return nil, string.format('%s %s', what, tostring(err)),
      fs.errno_code(errno, err)
  end
  local text, rerr, rcode = f:read(max + 1)
  f:close()
  if rcode == 21 then return nil, what .. ' ' .. path .. ': is a directory, not a file', 'EISDIR' end
  if rerr then return nil, what .. ' ' .. path .. ': ' .. tostring(rerr), 'EIO' end
  text = text or ''
  if #text > max then
    return nil, string.format('%s %s: more than the %d bytes read at most', what, path, max), 'EFBIG'
  end
  return text
end
M._read_text = read_text

--- Read a results file written by `sweep`.
-- Lines that do not parse (a line cut by a kill) are counted, not fatal.
-- @tparam string path results.jsonl (no NUL bytes)
-- @tparam[opt] string name only records of this sweep
-- @treturn {table,...} records in file order
-- @treturn integer number of lines that did not parse
-- @return or nil, message, CODE: "ENOENT" (no such file), "EACCES" (not
--   readable), "EISDIR" (a directory), "EFTYPE" (a FIFO, device or socket:
--   refused before opening, so it cannot block or run forever), "EFBIG"
--   (more than `plan.LOAD_MAX_BYTES`)
-- @raise when path is not a string without NUL bytes or name not a string
-- @usage local recs = plan.load('results/x/results.jsonl', 'delay sweep')
function M.load(path, name)
  local ctx = 'qoslab.plan.load'
  if path == nil then check.fail(ctx, 'path', 'a string', nil) end
  check.cstring(ctx, 'path', path)
  check.string(ctx, 'name', name)
  local text, err, code = read_text(path, M.LOAD_MAX_BYTES, 'results file')
  if not text then return nil, err, code end
  local out, bad = {}, 0
  for line in text:gmatch('[^\n]+') do
    if line ~= '' then
      local ok, rec = pcall(json.decode, line)
      if ok and type(rec) == 'table' and type(rec.params) == 'table' then
        rec = nulls_to_nil(rec)
        if name == nil or rec.sweep == name then out[#out + 1] = rec end
      else
        bad = bad + 1
      end
    end
  end
  return out, bad
end

local function read_file(path)
  local f = io.open(path, 'r')
  if not f then return nil end
  local s = f:read('a')
  f:close()
  return s
end

local function kernel_release()
  local s = read_file('/proc/sys/kernel/osrelease')
  return s and s:gsub('%s+$', '') or 'unknown'
end

local function qoslab_version()
  local ok, core = pcall(require, 'qoslab.core')
  return ok and type(core) == 'table' and core._VERSION or 'unknown'
end

-- Append one line and make it durable before the next point: the line goes out
-- in one write, the file is closed (so a kill -9 keeps it: it is in the page
-- cache), and fsync(2) on the file (qoslab.fs) keeps it through a power cut.
local function append_line(path, line, fsync)
  local f, err = io.open(path, 'a+')
  if not f then error(CTX .. ': cannot append to ' .. tostring(err), 0) end
  f:setvbuf('no')
  -- A line cut by a kill has no newline: start on a fresh line.
  local size = f:seek('end')
  local prefix = ''
  if size and size > 0 then
    f:seek('set', size - 1)
    if f:read(1) ~= '\n' then prefix = '\n' end
    f:seek('end')
  end
  local ok, werr = f:write(prefix .. line .. '\n')
  f:close()
  if not ok then error(CTX .. ': cannot write ' .. path .. ': ' .. tostring(werr), 0) end
  if fsync then fs.fsync(path) end
end

--- Defaults from the command line (qoslab run --out DIR --resume --guest).
-- @section defaults

local defaults = {}

--- Defaults that `sweep` uses when a plan leaves `out`, `resume`, `where` or
-- `backend` unset; `qoslab run` sets them from `--out`, `--resume`, where it ran
-- and the backend its testbeds take.
-- @tparam table d `{out = DIR, resume = bool, quick = bool, where =
--   "host"|"guest", backend = "netem"|"link", progress = bool|function,
--   on_record = function(record,
--   dir)}`; it replaces the defaults set before. `on_record` is called after
--   each record is appended to `dir/results.jsonl` (`qoslab run` writes the
--   folder's meta.json there, while the plan's testbed is up); an error it
--   raises ends the sweep as a run's error does
-- @raise on an unknown key or a value of the wrong type
-- @usage plan.set_defaults{out = '/tmp/r', resume = true}
function M.set_defaults(d)
  local ctx = 'qoslab.plan.set_defaults'
  check.table(ctx, 'd', d)
  check.keys(ctx, 'd', d,
    { out = true, resume = true, where = true, backend = true, progress = true, quick = true,
      on_record = true }, 2)
  check.func(ctx, 'd.on_record', d.on_record)
  check.cstring(ctx, 'd.out', d.out)
  check.boolean(ctx, 'd.resume', d.resume)
  check.boolean(ctx, 'd.quick', d.quick)
  check.enum(ctx, 'd.where', d.where, { 'host', 'guest' })
  check.enum(ctx, 'd.backend', d.backend, { 'netem', 'link' })
  if d.progress ~= nil and type(d.progress) ~= 'boolean' and type(d.progress) ~= 'function' then
    check.fail(ctx, 'd.progress', 'a boolean or a function', d.progress)
  end
  defaults = copy(d)
end

--- The current defaults (a copy).
-- @treturn table as given to `set_defaults` (`{}` before any call)
function M.get_defaults() return copy(defaults) end

--- Progress.
-- @section progress

local function fmt_duration(s)
  if s ~= nil and type(s) ~= 'number' then
    check.fail('qoslab.plan.format_duration', 's', 'a number of seconds or nil', s)
  end
  if not s or s ~= s or s == math.huge or s == -math.huge then return '?' end
  s = math.floor(s + 0.5)
  if s >= 3600 then return string.format('%dh%02dm', s // 3600, (s % 3600) // 60) end
  if s >= 60 then return string.format('%dm%02ds', s // 60, s % 60) end
  return string.format('%ds', s)
end
--- Human form of a duration: "42s", "3m07s", "2h05m"; "?" for nil, NaN or inf.
-- @tparam number|nil s seconds
-- @treturn string
-- @raise when s is neither a number nor nil
-- @usage plan.format_duration(187) --> "3m07s"
M.format_duration = fmt_duration

--- Human form of a metric value in bits/s (the default metric).
-- @tparam number v bits/s
-- @treturn string e.g. "226.1 Mbit/s"
function M.format_rate(v)
  if v == nil then return '-' end
  if type(v) ~= 'number' then check.fail('qoslab.plan.format_rate', 'v', 'a number (bits/s) or nil', v) end
  local a = math.abs(v)
  if a >= 1e9 then return string.format('%.3g Gbit/s', v / 1e9) end
  if a >= 1e6 then return string.format('%.4g Mbit/s', v / 1e6) end
  if a >= 1e3 then return string.format('%.4g kbit/s', v / 1e3) end
  return string.format('%.4g bit/s', v)
end

--- The progress line the default reporter prints for a point (without the
-- newline): `[sweep i/n] label: mean ± ci95 (n=N)  elapsed T, ETA T`.
-- @tparam table info as given to `opts.progress`
-- @treturn string
function M.progress_line(info)
  local ctx = 'qoslab.plan.progress_line'
  check.table(ctx, 'info', info)
  for _, k in ipairs { 'done', 'total' } do
    if math.type(info[k]) ~= 'integer' then check.fail(ctx, 'info.' .. k, 'an integer', info[k]) end
  end
  for _, k in ipairs { 'sweep', 'label' } do
    if type(info[k]) ~= 'string' then check.fail(ctx, 'info.' .. k, 'a string', info[k]) end
  end
  check.func(ctx, 'info.format', info.format)
  if info.summary ~= nil then check.table(ctx, 'info.summary', info.summary) end
  if info.summary and info.summary.mean and not info.format then
    check.fail(ctx, 'info.format', 'a function (to print the mean)', nil)
  end
  check.number(ctx, 'info.elapsed_s', info.elapsed_s)
  check.number(ctx, 'info.eta_s', info.eta_s)
  local last
  if info.skipped then
    last = 'skipped (' .. tostring(info.skip_reason) .. ')'
  elseif info.summary and info.summary.mean then
    last = info.format(info.summary.mean)
    if info.summary.ci95 then
      last = last .. string.format(' ± %s (n=%d)', info.format(info.summary.ci95), info.summary.n)
    end
  else
    last = 'failed: ' .. tostring(info.error)
  end
  return string.format('[%s %d/%d] %s: %s%s  elapsed %s, ETA %s',
    info.sweep, info.done, info.total, info.label, last, info.resumed and ' (resumed)' or '',
    fmt_duration(info.elapsed_s), fmt_duration(info.eta_s))
end

local function default_progress(info)
  io.stderr:write(M.progress_line(info), '\n')
  io.stderr:flush()
end

--- The sweep.
-- @section the_sweep

local function default_metric(res)
  if type(res) == 'number' then return res end
  if type(res) == 'table' and type(res.received) == 'table' then
    return res.received.bits_per_second
  end
  return nil
end

-- xpcall handler: the message alone, so a plan's error reads as one line; the
-- stack only with QOSLAB_DEBUG=1 (and only once, at the innermost level).
local function keep_message(e)
  if os.getenv('QOSLAB_DEBUG') == '1' and type(e) == 'string'
      and not e:find('\nstack traceback:', 1, true) then
    return debug.traceback(e, 2)
  end
  return e
end

-- A stop request (SIGINT/SIGTERM/SIGHUP) seen by qoslab's signal handler;
-- without qoslab.core (pure-Lua use) there is none.
local function stop_pending()
  local ok, core = pcall(require, 'qoslab.core')
  return ok and type(core) == 'table' and core.signal_pending ~= nil and core.signal_pending() ~= nil
end

-- The signal of an interruption error (qoslab.core raises one on SIGINT,
-- SIGTERM or SIGHUP; code "EINTR"), nil for any other error.
local function interrupted_by(e)
  local ok, core = pcall(require, 'qoslab.core')
  if ok and type(core) == 'table' and core.interrupted_by then return core.interrupted_by(e) end
  return nil
end

local function now_s()
  local ok, core = pcall(require, 'qoslab.core')
  if ok and type(core) == 'table' and core.now then return core.now() end
  return os.time()
end

-- The backend a record names: the sweep's, else the first open testbed's
-- (qoslab.testbed, if the plan loaded it), else the default.
local function record_backend(o)
  if o.backend then return o.backend end
  local tbm = package.loaded['qoslab.testbed']
  local open = type(tbm) == 'table' and tbm.open_testbeds and tbm.open_testbeds() or {}
  if open[1] then return open[1].backend end
  return defaults.backend
end

local ALLOWED = {
  name = true, params = true, order = true, points = true, repeat_count = true,
  run = true, metric = true, metric_name = true, stop_row = true,
  setup = true, teardown = true, setup_point = true, teardown_point = true,
  out = true, resume = true, progress = true, meta = true, where = true, backend = true,
  on_error = true, keep_results = true, fsync = true, format = true,
}

-- The sweep's options, each error at the caller's line. level as in
-- check.fail (1 = the caller of the function calling validate); the
-- positions are passed down, not counted by hand, so a helper between
-- sweep and its caller cannot shift them.
local function validate(o, level)
  local L = level + 1
  check.table(CTX, 'opts', o, L)
  -- check.keys counts its levels from its own caller: one more
  check.keys(CTX, 'opts', o, ALLOWED, L + 1)
  if type(o.name) ~= 'string' or o.name == '' then
    check.fail(CTX, 'opts.name', 'a non-empty string', o.name, L)
  end
  check.string(CTX, 'opts.metric_name', o.metric_name, nil, L)
  if o.params == nil and o.points == nil then
    error(CTX .. ': opts.params or opts.points is required', L + 1)
  end
  if o.params ~= nil and o.points ~= nil then
    error(CTX .. ': opts.params and opts.points exclude each other', L + 1)
  end
  if type(o.run) ~= 'function' then check.fail(CTX, 'opts.run', 'a function', o.run, L) end
  for _, k in ipairs { 'metric', 'stop_row', 'setup', 'teardown', 'setup_point',
                       'teardown_point', 'format' } do
    check.func(CTX, 'opts.' .. k, o[k], nil, L)
  end
  check.integer(CTX, 'opts.repeat_count', o.repeat_count, 1, 100000, 1, L)
  if o.out ~= nil then check.cstring(CTX, 'opts.out', o.out, nil, L) end
  check.boolean(CTX, 'opts.resume', o.resume, false, L)
  check.boolean(CTX, 'opts.keep_results', o.keep_results, true, L)
  check.boolean(CTX, 'opts.fsync', o.fsync, true, L)
  check.enum(CTX, 'opts.on_error', o.on_error, { 'raise', 'record' }, 'raise', L)
  if o.where ~= nil then check.enum(CTX, 'opts.where', o.where, { 'host', 'guest' }, nil, L) end
  if o.backend ~= nil then check.enum(CTX, 'opts.backend', o.backend, { 'netem', 'link' }, nil, L) end
  if o.meta ~= nil then check.table(CTX, 'opts.meta', o.meta, L) end
  local p = o.progress
  if p ~= nil and type(p) ~= 'boolean' and type(p) ~= 'function' then
    check.fail(CTX, 'opts.progress', 'a boolean or a function', p, L)
  end
end

-- The points to visit and the order of their parameters, from opts.params
-- (check_product's rules) or opts.points (tables; values not NaN or inf,
-- and no point twice: both would break the key a record is found by).
-- level as in check.fail.
local function resolve_points(o, level)
  local L = level + 1
  if o.params then
    local order = check_product(CTX, o.params, o.order, L, 'opts.')
    return product_of(o.params, order), order
  end
  local order = o.order
  check.table(CTX, 'opts.points', o.points, L)
  if #o.points == 0 then check.fail(CTX, 'opts.points', 'a non-empty list', o.points, L) end
  local first = {}
  for i, p in ipairs(o.points) do
    local field = 'opts.points[' .. i .. ']'
    if type(p) ~= 'table' then check.fail(CTX, field, 'a table', p, L) end
    for k, v in pairs(p) do
      if type(k) ~= 'string' then check.fail(CTX, field .. ' key', 'a string (a parameter name)', k, L) end
      if not finite(v) then check.fail(CTX, field .. '.' .. k, 'a finite number', v, L) end
    end
    local key = key_of(p)
    if first[key] then
      error(string.format('%s: %s: expected a point not listed before, got the same parameters as '
        .. 'opts.points[%d] (%s)', CTX, field, first[key], key), L + 1)
    end
    first[key] = i
  end
  if order == nil then
    order = {}
    for k in pairs(o.points[1]) do order[#order + 1] = k end
    table.sort(order)
  else
    check.table(CTX, 'opts.order', order, L)
    local seen = {}
    for i, k in ipairs(order) do
      local found = false
      for _, p in ipairs(o.points) do found = found or (type(k) == 'string' and p[k] ~= nil) end
      if not found then check.fail(CTX, 'opts.order[' .. i .. ']', 'a name in opts.points', k, L) end
      if seen[k] then error(CTX .. ': opts.order: "' .. k .. '" listed twice', L + 1) end
      seen[k] = true
    end
  end
  local pts = {}
  for i, p in ipairs(o.points) do pts[i] = copy(p) end
  return pts, order
end

local function call_hook(fn, ...)
  if fn then return fn(...) end
end

--- Run a sweep.
-- @tparam table opts
--   * `name` (string, required): the experiment's name, stored in every record
--     and used to match records on resume (several sweeps can share one file).
--   * `params` (table name -> list): the cartesian product of these values
--     (each list non-empty, its values distinct, none NaN or inf); or
--   * `points` (list of tables name -> value): an explicit list of points
--     (no point twice, no value NaN or inf).
--   * `order` ({string,...}): parameter names, outermost first (default: sorted
--     names). The innermost parameter is the one a stop rule stops.
--   * `repeat_count` (integer ≥ 1, default 1): runs per point.
--   * `run` (function(point, ctx) -> result): one measurement; returns a result
--     table (see qoslab.client) or a number, or nil, message[, CODE] on failure.
--     `ctx` = {sweep, index, total, repetition, out, data = {} shared by the hooks}.
--   * `metric` (function(result) -> number): the value summarised (default:
--     `result.received.bits_per_second`, or the number itself).
--   * `metric_name` (string, default "received.bits_per_second").
--   * `format` (function(number) -> string): for the progress line (default bit/s).
--   * `stop_row` (function(point, summary) -> bool): after a point, true skips
--     the later points of its row (same values of all but the innermost
--     parameter); they are recorded with `skipped = true`.
--   * `setup(ctx)` / `teardown(ctx, err)`: once per sweep; teardown always runs.
--   * `setup_point(point, ctx)` / `teardown_point(point, ctx, err)`: per point;
--     teardown_point always runs (err is the error, or nil).
--   * `out` (string dir, default from `set_defaults`, else none): records are
--     appended to `out/results.jsonl`.
--   * `resume` (bool, default false): skip points already recorded for this name.
--   * `progress` (true|false|function(info)): a line per point on stderr with
--     points done/total, elapsed, ETA and the last result (default true).
--   * `meta` (table): stored in every record. `where` ("host"|"guest", default
--     from set_defaults or "host": where the sweep ran). `backend`
--     ("netem"|"link": what impaired the path; default the backend of the
--     first open `qoslab.testbed` when a record is written, else from
--     set_defaults, else absent). `on_error` ("raise" default | "record": a
--     failed point is recorded with `error` and the sweep continues).
--     `keep_results` (default true: raw results in records and summary).
--     `fsync` (default true).
-- @treturn table summary `{name, order, out, results_file, elapsed_s, where,
--   backend (as in the last record), points =
--   {{params, label, index, n, mean, stdev, ci95, ci_low, ci_high, min, max,
--     values, results, skipped, skip_reason, error, resumed, elapsed_s}, ...}}`
-- @raise on bad options (`"qoslab.plan.sweep: opts.<field>: expected ...,
--   got ..."`, at the caller's line, before anything runs), and the first
--   error of a run/hook (after teardown) unless on_error = "record";
--   interruptions (SIGINT/SIGTERM) always raise.
-- @usage local s = plan.sweep{name = 'delay', params = {delay_ms = {1, 10}},
--   run = function(p) return measure(p.delay_ms) end}
function M.sweep(opts)
  validate(opts, 1)
  local points, order = resolve_points(opts, 1)
  local name = opts.name
  local reps = opts.repeat_count or 1
  local metric = opts.metric or default_metric
  local fmt = opts.format or M.format_rate
  local out = opts.out or defaults.out
  local resume = opts.resume
  if resume == nil then resume = defaults.resume or false end
  local where = opts.where or defaults.where or 'host'
  local keep = opts.keep_results ~= false
  local on_error = opts.on_error or 'raise'
  local progress = opts.progress
  if progress == nil then progress = defaults.progress end
  if progress == nil then progress = true end
  if progress == true then progress = default_progress end

  local results_file
  local done = {}   -- point key -> record (resume)
  if out then
    local made, merr, mcode = fs.mkdir_p(out)
    if made == nil then error(string.format('%s: %s (%s)', CTX, tostring(merr), tostring(mcode)), 2) end
    results_file = out .. '/results.jsonl'
    if resume then
      local recs, lerr, lcode = M.load(results_file, name)
      -- no file yet: nothing to resume; any other failure would hide the
      -- recorded points and run them again
      if not recs and lcode ~= 'ENOENT' then
        error(string.format('%s: cannot resume: %s (%s)', CTX, tostring(lerr), tostring(lcode)), 2)
      end
      for _, r in ipairs(recs or {}) do
        if not r.error and type(r.params) == 'table' then done[key_of(r.params)] = r end
      end
      -- Nothing under this name, but this sweep's points under another: a
      -- renamed sweep would run every point again into the same file. (Two
      -- sweeps of one plan may share their points, so this is said, not
      -- refused.)
      if recs and #recs == 0 then
        local other, names = {}, {}
        for _, r in ipairs(M.load(results_file) or {}) do
          if type(r.params) == 'table' and r.sweep ~= name then
            other[key_of(r.params)] = true
            names[string.format('%q', tostring(r.sweep))] = true
          end
        end
        local hit = false
        for _, p in ipairs(points) do if other[key_of(p)] then hit = true break end end
        if hit then
          local list = {}
          for n in pairs(names) do list[#list + 1] = n end
          table.sort(list)
          M.warn(string.format('%s: resuming sweep %q in %s: none of its points are recorded under '
            .. 'that name, but they are under %s; if the sweep was renamed, stop and give it its old '
            .. 'name, or every point runs again', CTX, name, out, table.concat(list, ', ')))
        end
      end
    end
  end

  local meta_common = {
    qoslab_version = qoslab_version(), kernel = kernel_release(), where = where,
    hostname = (read_file('/proc/sys/kernel/hostname') or ''):gsub('%s+$', ''),
  }
  local run_id = string.format('%d-%d', os.time(), math.random(0, 0x7fffffff))

  local summary = { name = name, order = order, out = out, results_file = results_file,
                    metric = opts.metric_name or 'received.bits_per_second',
                    points = {}, run_id = run_id, where = where, backend = opts.backend }
  local ctx = { sweep = name, total = #points, out = out, data = {}, where = where,
                quick = defaults.quick }
  local t0 = now_s()
  local measured_time, measured_points = 0, 0
  local stopped_rows = {}

  local function record(entry)
    if not results_file then return end
    local rec = {
      sweep = name, run_id = run_id, index = entry.index, params = entry.params,
      order = order, repetitions = reps, metric = summary.metric,
      time_unix_s = os.time(), time = os.date('!%Y-%m-%dT%H:%M:%SZ'),
      elapsed_s = entry.elapsed_s, skipped = entry.skipped, skip_reason = entry.skip_reason,
      error = entry.error,
      summary = { n = entry.n, mean = entry.mean, stdev = entry.stdev, ci95 = entry.ci95,
                  ci_low = entry.ci_low, ci_high = entry.ci_high, min = entry.min,
                  max = entry.max, values = entry.values },
      results = keep and entry.results or nil,
      meta = opts.meta,
    }
    for k, v in pairs(meta_common) do rec[k] = v end
    rec.backend = record_backend(opts)
    summary.backend = rec.backend
    append_line(results_file, M.encode(rec), opts.fsync ~= false)
    if defaults.on_record then defaults.on_record(rec, out) end
  end

  local function report_progress(entry, i)
    if not progress then return end
    local elapsed = now_s() - t0
    local remaining = #points - i
    local eta = measured_points > 0 and measured_time / measured_points * remaining or nil
    if remaining == 0 then eta = 0 end
    progress {
      sweep = name, done = i, total = #points, label = entry.label, point = entry.params,
      summary = entry, skipped = entry.skipped, skip_reason = entry.skip_reason,
      error = entry.error, resumed = entry.resumed, elapsed_s = elapsed, eta_s = eta,
      format = fmt,
    }
  end

  local function run_point(i, point, entry)
    local values, results = {}, {}
    local perr
    local pt0 = now_s()
    ctx.index, ctx.point = i, point
    local ok, err = xpcall(function()
      call_hook(opts.setup_point, point, ctx)
      for r = 1, reps do
        ctx.repetition = r
        local res, msg, code = opts.run(copy(point), ctx)
        if res == nil then
          error(string.format('%s: %s: run failed: %s%s', CTX, entry.label, tostring(msg),
            code and (' (' .. tostring(code) .. ')') or ''), 0)
        end
        if opts.metric == nil and type(res) ~= 'table' and type(res) ~= 'number' then
          error(string.format('%s: %s: run returned %s; expected a result table or a number',
            CTX, entry.label, type(res) == 'string' and string.format('string %q', res)
              or tostring(res)), 0)
        end
        local v = metric(res)
        if type(v) ~= 'number' or v ~= v then
          error(string.format('%s: %s: metric returned %s, expected a number', CTX,
            entry.label, tostring(v)), 0)
        end
        values[#values + 1] = v
        results[#results + 1] = res
      end
    end, keep_message)
    if not ok then perr = err end
    local tok, terr = pcall(call_hook, opts.teardown_point, point, ctx, perr)
    if not tok and not perr then perr = terr end
    entry.elapsed_s = now_s() - pt0
    if perr then return perr end
    local st = M.stats(values)
    for k, v in pairs(st) do entry[k] = v end
    entry.results = keep and results or nil
    measured_time = measured_time + entry.elapsed_s
    measured_points = measured_points + 1
  end

  local sweep_err
  local ok, err = xpcall(function()
    call_hook(opts.setup, ctx)
    for i, point in ipairs(points) do
      local key = key_of(point)
      local entry = { index = i, params = point, label = label(point, order), key = key }
      local rk = row_key(point, order)
      local prev = done[key]
      if prev then
        entry.resumed = true
        for k, v in pairs(prev.summary or {}) do entry[k] = v end
        entry.skipped, entry.skip_reason = prev.skipped, prev.skip_reason
        entry.results, entry.elapsed_s = prev.results, prev.elapsed_s
      elseif stopped_rows[rk] then
        entry.skipped = true
        entry.skip_reason = stopped_rows[rk]
        entry.n, entry.values = 0, {}
        record(entry)
      else
        local perr = run_point(i, point, entry)
        if perr then
          -- A stop request (SIGINT/SIGTERM/SIGHUP) ends the sweep whatever the
          -- point made of it: decided on the error's code or the pending
          -- signal, never on the text.
          if on_error == 'raise' or interrupted_by(perr) or stop_pending() then
            error(perr, 0)
          end
          entry.error = tostring(perr):match('^[^\n]*')
          entry.n, entry.values = 0, {}
        end
        record(entry)
      end
      if opts.stop_row and not entry.skipped and not entry.error and not stopped_rows[rk] then
        if opts.stop_row(copy(point), entry) then
          stopped_rows[rk] = 'stop rule after ' .. entry.label
        end
      end
      summary.points[i] = entry
      report_progress(entry, i)
    end
  end, keep_message)
  if not ok then sweep_err = err end
  local tok, terr = pcall(call_hook, opts.teardown, ctx, sweep_err)
  summary.elapsed_s = now_s() - t0
  if sweep_err then
    if not tok then sweep_err = tostring(sweep_err) .. '\n(teardown also failed: ' .. tostring(terr) .. ')' end
    error(sweep_err, 0)
  end
  if not tok then error(terr, 0) end
  return summary
end

--- Find a point of a summary by its parameters.
-- @tparam table summary as returned by sweep
-- @tparam table params name -> value (all of the point's parameters)
-- @treturn table|nil the point entry
-- @raise when summary has no points list or params is not a table of values
-- @usage local p = plan.find(summary, {delay_ms = 100})
function M.find(summary, params)
  local ctx = 'qoslab.plan.find'
  check.table(ctx, 'summary', summary)
  check.table(ctx, 'summary.points', summary.points)
  check_params(ctx, 'params', params, 1)
  local key = key_of(params)
  for _, p in ipairs(summary.points) do
    if type(p) == 'table' and type(p.params) == 'table' and key_of(p.params) == key then
      return p
    end
  end
  return nil
end

return M
