--- Reports of sweeps: terminal tables, CSV and JSON files.
--
-- Works on the summary `qoslab.plan.sweep` returns (or on records read back
-- with `qoslab.plan.load`). Tables put the unit in the header; the matrix form
-- is the reference experiment's: rows = loss, columns = delay.
-- @module qoslab.report
local check = require 'qoslab.check'
local plan = require 'qoslab.plan'
local fs = require 'qoslab.fs'
local cjson = require 'cjson'

local M = {}

local function utf8len(s)
  return utf8.len(s) or #s
end

local function pad(s, w, align)
  local n = w - utf8len(s)
  if n <= 0 then return s end
  if align == 'left' then return s .. string.rep(' ', n) end
  return string.rep(' ', n) .. s
end

local function cell_text(v)
  if v == nil then return '-' end
  if math.type(v) == 'float' then
    if v == math.floor(v) and math.abs(v) < 1e15 then return string.format('%d', v) end
    return string.format('%.4g', v)
  end
  return tostring(v)
end

--- Format a table for the terminal.
-- @tparam table t `{title = string|nil, columns = {string | {name=, header=,
--   align = "left"|"right"}, ...}, rows = {row, ...}}`; a row is a list (by
--   column position) or a map (by column name); nil cells print as "-".
-- @treturn string the table, lines ending in "\n"
-- @usage io.write(report.format_table{columns = {'a', 'b'}, rows = {{1, 2}}})
function M.format_table(t)
  local ctx = 'qoslab.report.format_table'
  check.table(ctx, 't', t)
  check.table(ctx, 't.columns', t.columns)
  check.table(ctx, 't.rows', t.rows)
  local cols = {}
  for i, c in ipairs(t.columns) do
    if type(c) == 'string' then c = { name = c } end
    if type(c) ~= 'table' or type(c.name) ~= 'string' then
      check.fail(ctx, 't.columns[' .. i .. ']', 'a string or {name=...}', c)
    end
    cols[i] = { name = c.name, header = c.header or c.name, align = c.align or 'right' }
  end
  local cells = {}
  local width = {}
  for i, c in ipairs(cols) do width[i] = utf8len(c.header) end
  for r, row in ipairs(t.rows) do
    cells[r] = {}
    for i, c in ipairs(cols) do
      local v = row[i]
      if v == nil then v = row[c.name] end
      local s = cell_text(v)
      cells[r][i] = s
      if utf8len(s) > width[i] then width[i] = utf8len(s) end
    end
  end
  local out = {}
  if t.title then out[#out + 1] = t.title end
  local hdr, sep = {}, {}
  for i, c in ipairs(cols) do
    hdr[i] = pad(c.header, width[i], c.align)
    sep[i] = string.rep('-', width[i])
  end
  out[#out + 1] = table.concat(hdr, ' | ')
  out[#out + 1] = table.concat(sep, '-+-')
  for r = 1, #cells do
    local line = {}
    for i, c in ipairs(cols) do line[i] = pad(cells[r][i], width[i], c.align) end
    out[#out + 1] = table.concat(line, ' | ')
  end
  return table.concat(out, '\n') .. '\n'
end

--- Print a table (format_table to stdout).
-- @tparam table t as for `format_table`
-- @usage report.print_table{columns = {'a', 'b'}, rows = {{1, 2}}}
function M.print_table(t) io.write(M.format_table(t)) end

--- A number with `digits` significant digits, but never an exponent for
-- large values ("1000", not "1e+03").
-- @function sig
-- @tparam number v
-- @tparam integer digits significant digits, >= 1
-- @treturn string
-- @usage report.sig(225.93, 3) --> "226"
local function sig(v, digits)
  if math.abs(v) >= 10 ^ digits then return string.format('%.0f', v) end
  return string.format('%.' .. digits .. 'g', v)
end
M.sig = sig

--- A point's value as "mean ± ci" in a unit.
-- @tparam table p a point of a sweep summary
-- @tparam[opt=1] number scale divide values by this (1e6 for Mbit/s)
-- @tparam[opt=3] integer digits significant digits of the mean
-- @treturn string "226 ± 2.1", "226" (n = 1), "stop" (skipped), "error", or "-"
function M.mean_ci(p, scale, digits)
  scale = scale or 1
  digits = digits or 3
  if p == nil then return '-' end
  if p.skipped then return 'stop' end
  if p.error then return 'error' end
  if p.mean == nil then return '-' end
  local s = sig(p.mean / scale, digits)
  if p.ci95 then s = s .. ' ± ' .. sig(p.ci95 / scale, 2) end
  return s
end

local function points_of(summary)
  if type(summary) ~= 'table' then return nil end
  if summary.points then return summary.points end
  return summary  -- a list of records from plan.load
end

local function entry_stats(p)
  -- Entries from plan.sweep carry the statistics at top level; records from
  -- plan.load carry them under `summary`.
  if p.summary and p.mean == nil then
    local e = {}
    for k, v in pairs(p.summary) do e[k] = v end
    e.params, e.skipped, e.error = p.params, p.skipped, p.error
    return e
  end
  return p
end

--- The distinct values of one parameter over a sweep's points, sorted
-- (numbers numerically; mixed types by their text).
-- @function distinct
-- @tparam {table,...} points sweep points (`summary.points`) or `plan.load` records
-- @tparam string name a parameter name
-- @treturn {any,...} the values (points without the parameter are skipped)
-- @usage report.distinct(s.points, 'delay_ms') --> {10, 100, 300}
local function distinct(points, name)
  local seen, out = {}, {}
  for _, p in ipairs(points) do
    local v = p.params[name]
    if v ~= nil and not seen[v] then seen[v] = true out[#out + 1] = v end
  end
  table.sort(out, function(a, b)
    if type(a) == type(b) then return a < b end
    return tostring(a) < tostring(b)
  end)
  return out
end
M.distinct = distinct

--- Matrix table of one value over two parameters (the reference's shape).
-- @tparam table summary from plan.sweep (or a list of records from plan.load)
-- @tparam table opts `{row = "loss_pct", col = "delay_ms", row_label = "loss %",
--   col_label = "delay ms", scale = 1e6, unit = "Mbit/s", digits = 3, ci = false,
--   title = string, where = {name = value} (fixes other parameters)}`
-- @treturn string the table
-- @usage io.write(report.matrix(s, {row = 'loss_pct', col = 'delay_ms'}))
function M.matrix(summary, opts)
  return M.format_table(M.matrix_table(summary, opts, 'qoslab.report.matrix'))
end

--- The table `matrix` prints, as data (for other renderings: the HTML report).
-- @tparam table summary as for `matrix`
-- @tparam table opts as for `matrix`
-- @tparam[opt] string ctx the function named in errors (default "qoslab.report.matrix_table")
-- @treturn table `{title =, columns = {{name =, header =}, ...}, rows = {{cell, ...}, ...}}`
--   (cells as text), as `format_table` takes
-- @usage local t = report.matrix_table(s, {row = 'loss_pct', col = 'delay_ms'})
function M.matrix_table(summary, opts, ctx)
  ctx = ctx or 'qoslab.report.matrix_table'
  local points = points_of(summary)
  check.table(ctx, 'summary', points)
  check.table(ctx, 'opts', opts)
  check.keys(ctx, 'opts', opts, { row = true, col = true, row_label = true, col_label = true,
    scale = true, unit = true, digits = true, ci = true, title = true, where = true })
  local row = check.string(ctx, 'opts.row', opts.row, 'loss_pct')
  local col = check.string(ctx, 'opts.col', opts.col, 'delay_ms')
  local scale = check.number(ctx, 'opts.scale', opts.scale, 0, nil, 1e6)
  local unit = check.string(ctx, 'opts.unit', opts.unit, 'Mbit/s')
  local digits = check.integer(ctx, 'opts.digits', opts.digits, 1, 17, 3)
  local rl = opts.row_label or row:gsub('_pct$', ' %%'):gsub('_ms$', ' ms'):gsub('_', ' ')
  local cl = opts.col_label or col:gsub('_pct$', ' %%'):gsub('_ms$', ' ms'):gsub('_', ' ')
  local sel = {}
  for _, p in ipairs(points) do
    local ok = true
    for k, v in pairs(opts.where or {}) do if p.params[k] ~= v then ok = false end end
    if ok then sel[#sel + 1] = entry_stats(p) end
  end
  local rows_v, cols_v = distinct(sel, row), distinct(sel, col)
  local cells = {}
  for _, p in ipairs(sel) do
    cells[plan.point_key { r = p.params[row], c = p.params[col] }] = p
  end
  local columns = { { name = 'row', header = rl .. ' \\ ' .. cl } }
  for i, c in ipairs(cols_v) do columns[i + 1] = { name = 'c' .. i, header = cell_text(c) } end
  local rows = {}
  for _, r in ipairs(rows_v) do
    local line = { cell_text(r) }
    for i, c in ipairs(cols_v) do
      local p = cells[plan.point_key { r = r, c = c }]
      if p == nil then
        line[i + 1] = ''
      elseif opts.ci then
        line[i + 1] = M.mean_ci(p, scale, digits)
      elseif p.skipped then
        line[i + 1] = 'stop'
      elseif p.error or p.mean == nil then
        line[i + 1] = 'error'
      else
        line[i + 1] = sig(p.mean / scale, digits)
      end
    end
    rows[#rows + 1] = line
  end
  local title = (opts.title and (opts.title .. ' ') or '') .. '(' .. unit .. ')'
  return { title = title, columns = columns, rows = rows }
end

--- Flat rows of a sweep: one per point, parameters first, then statistics.
-- @tparam table summary from plan.sweep (or records from plan.load)
-- @tparam[opt] table opts `{unit = "bps"}`: suffix of the statistic columns
--   (mean_bps, stdev_bps, ci95_bps, ci_low_bps, ci_high_bps, min_bps, max_bps)
-- @treturn table `{columns = {...}, rows = {{name = value, ...}, ...}}`
function M.rows(summary, opts)
  local ctx = 'qoslab.report.rows'
  local points = points_of(summary)
  check.table(ctx, 'summary', points)
  opts = opts or {}
  check.keys(ctx, 'opts', opts, { unit = true })
  local u = '_' .. check.string(ctx, 'opts.unit', opts.unit, 'bps')
  local order = summary.order
  if not order then
    local seen = {}
    order = {}
    for _, p in ipairs(points) do
      for k in pairs(p.params) do
        if not seen[k] then seen[k] = true order[#order + 1] = k end
      end
    end
    table.sort(order)
  end
  local columns = {}
  for i, k in ipairs(order) do columns[i] = k end
  local stat = { 'n', 'mean', 'stdev', 'ci95', 'ci_low', 'ci_high', 'min', 'max' }
  for _, s in ipairs(stat) do columns[#columns + 1] = s == 'n' and 'n' or (s .. u) end
  columns[#columns + 1] = 'skipped'
  columns[#columns + 1] = 'error'
  local rows = {}
  for _, p0 in ipairs(points) do
    local p = entry_stats(p0)
    local r = {}
    for _, k in ipairs(order) do r[k] = p.params[k] end
    for _, s in ipairs(stat) do r[s == 'n' and 'n' or (s .. u)] = p[s] end
    r.skipped = p.skipped and true or false
    r.error = p.error
    rows[#rows + 1] = r
  end
  return { columns = columns, rows = rows }
end

local function csv_field(v)
  if v == nil then return '' end
  local s
  if math.type(v) == 'integer' then
    s = string.format('%d', v)
  elseif type(v) == 'number' then
    s = string.format('%.17g', v)
  else
    s = tostring(v)
  end
  if s:find('[,"\r\n]') then s = '"' .. s:gsub('"', '""') .. '"' end
  return s
end

--- Write a CSV file (RFC 4180: comma, CRLF-free "\n" lines, quotes doubled).
-- Numbers are written exactly (%.17g), so read_csv gives the same values back.
-- @tparam string path file to write
-- @tparam table t `{columns = {...}, rows = {...}}` (as rows() returns) or a
--   sweep summary (converted with rows())
-- @return true, or nil, message, CODE when the file cannot be written (from
--   the errno: "ENOENT", "ENOTDIR", "EACCES", "EROFS", "ENAMETOOLONG", ...)
-- @usage report.write_csv('out/delay.csv', summary)
function M.write_csv(path, t)
  local ctx = 'qoslab.report.write_csv'
  if path == nil then check.fail(ctx, 'path', 'a string', nil) end
  check.cstring(ctx, 'path', path)
  check.table(ctx, 't', t)
  if t.points or (t[1] and t[1].params) then t = M.rows(t) end
  check.table(ctx, 't.columns', t.columns)
  local f, err, errno = io.open(path, 'w')
  if not f then return nil, 'cannot write ' .. tostring(err), fs.errno_code(errno, err) end
  local cols = {}
  for i, c in ipairs(t.columns) do cols[i] = type(c) == 'table' and c.name or c end
  local line = {}
  for i, c in ipairs(cols) do line[i] = csv_field(c) end
  f:write(table.concat(line, ','), '\n')
  for _, row in ipairs(t.rows) do
    line = {}
    for i, c in ipairs(cols) do
      local v = row[i]
      if v == nil then v = row[c] end
      line[i] = csv_field(v)
    end
    f:write(table.concat(line, ','), '\n')
  end
  f:close()
  return true
end

local function parse_csv_line(s, pos)
  -- Returns the fields of the record starting at pos and the next position.
  local fields = {}
  local n = #s
  while true do
    local c = s:sub(pos, pos)
    if c == '"' then
      local buf = {}
      pos = pos + 1
      while true do
        local q = s:find('"', pos, true)
        if not q then error('qoslab.report.read_csv: unterminated quote', 0) end
        buf[#buf + 1] = s:sub(pos, q - 1)
        if s:sub(q + 1, q + 1) == '"' then
          buf[#buf + 1] = '"'
          pos = q + 2
        else
          pos = q + 1
          break
        end
      end
      fields[#fields + 1] = { table.concat(buf), quoted = true }
    else
      local e = s:find('[,\n]', pos) or (n + 1)
      fields[#fields + 1] = { s:sub(pos, e - 1) }
      pos = e
    end
    local d = s:sub(pos, pos)
    if d == ',' then
      pos = pos + 1
    else
      if d == '\n' then pos = pos + 1 end
      return fields, pos
    end
  end
end

local function csv_value(f)
  local s = f[1]
  if f.quoted then return s end
  if s == '' then return nil end
  if s == 'true' then return true end
  if s == 'false' then return false end
  return math.tointeger(tonumber(s)) or tonumber(s) or s
end

--- Read a CSV file written by write_csv.
-- @tparam string path
-- @treturn table `{columns = {...}, rows = {{name = value}, ...}}` (numbers and
--   booleans converted, empty cells nil)
-- @return or nil, message, CODE: "ENOENT", "EACCES", "EISDIR", "EFTYPE" (a
--   FIFO or device: refused, it could block), "EFBIG"
function M.read_csv(path)
  if path == nil then check.fail('qoslab.report.read_csv', 'path', 'a string', nil) end
  check.cstring('qoslab.report.read_csv', 'path', path)
  -- The bounded reader: a FIFO or device is refused before it is opened.
  local s, err, code = plan._read_text(path, plan.LOAD_MAX_BYTES, 'CSV file')
  if not s then return nil, err, code end
  local pos = 1
  local header
  header, pos = parse_csv_line(s, pos)
  local columns = {}
  for i, h in ipairs(header) do columns[i] = h[1] end
  local rows = {}
  while pos <= #s do
    local fields
    fields, pos = parse_csv_line(s, pos)
    local r = {}
    for i, c in ipairs(columns) do if fields[i] then r[c] = csv_value(fields[i]) end end
    rows[#rows + 1] = r
  end
  return { columns = columns, rows = rows }
end

--- Write a value as JSON (NaN/inf become null; functions dropped).
-- A sweep summary is written without the raw results unless opts.results.
-- @tparam string path
-- @param value table to write
-- @tparam[opt] table opts `{results = false}`
-- @return true, or nil, message, CODE as `write_csv`
function M.write_json(path, value, opts)
  local ctx = 'qoslab.report.write_json'
  if path == nil then check.fail(ctx, 'path', 'a string', nil) end
  check.cstring(ctx, 'path', path)
  opts = opts or {}
  check.keys(ctx, 'opts', opts, { results = true })
  if type(value) == 'table' and value.points and not opts.results then
    local v = {}
    for k, e in pairs(value) do v[k] = e end
    v.points = {}
    for i, p in ipairs(value.points) do
      local q = {}
      for k, e in pairs(p) do if k ~= 'results' then q[k] = e end end
      v.points[i] = q
    end
    value = v
  end
  local f, err, errno = io.open(path, 'w')
  if not f then return nil, 'cannot write ' .. tostring(err), fs.errno_code(errno, err) end
  f:write(plan.encode(value), '\n')
  f:close()
  return true
end

--- Read a JSON file (null becomes nil).
-- @tparam string path
-- @return value, or nil, message, CODE: as `read_csv`, or "EINVAL" (not JSON)
function M.read_json(path)
  if path == nil then check.fail('qoslab.report.read_json', 'path', 'a string', nil) end
  check.cstring('qoslab.report.read_json', 'path', path)
  -- The bounded reader: a FIFO or device is refused before it is opened.
  local s, err, code = plan._read_text(path, plan.LOAD_MAX_BYTES, 'JSON file')
  if not s then return nil, err, code end
  local ok, v = pcall(cjson.decode, s)
  if not ok then return nil, path .. ': ' .. tostring(v), 'EINVAL' end
  local function unnull(x)
    if x == cjson.null then return nil end
    if type(x) == 'table' then for k, e in pairs(x) do x[k] = unnull(e) end end
    return x
  end
  return unnull(v)
end

--- A one-parameter table: each point with its value (mean ± CI) and extra columns.
-- @tparam table summary
-- @tparam table opts `{title =, scale = 1e6, unit = "Mbit/s", digits = 3,
--   extra = {{header = string, value = function(point) -> value}, ...}}`
-- @treturn string
function M.series(summary, opts)
  return M.format_table(M.series_table(summary, opts, 'qoslab.report.series'))
end

--- The table `series` prints, as data (for other renderings: the HTML report).
-- @tparam table summary as for `series`
-- @tparam[opt] table opts as for `series`
-- @tparam[opt] string ctx the function named in errors (default "qoslab.report.series_table")
-- @treturn table `{title =, columns = {{name =, header =}, ...}, rows = {{name = value}, ...}}`
--   as `format_table` takes
function M.series_table(summary, opts, ctx)
  ctx = ctx or 'qoslab.report.series_table'
  local points = points_of(summary)
  check.table(ctx, 'summary', points)
  opts = opts or {}
  check.keys(ctx, 'opts', opts, { title = true, scale = true, unit = true, digits = true,
    extra = true })
  local scale = check.number(ctx, 'opts.scale', opts.scale, 0, nil, 1e6)
  local unit = check.string(ctx, 'opts.unit', opts.unit, 'Mbit/s')
  local order = summary.order or {}
  local columns = {}
  for i, k in ipairs(order) do
    columns[i] = { name = k, header = k:gsub('_pct$', ' %%'):gsub('_ms$', ' ms'):gsub('_bytes$', ' B'):gsub('_', ' ') }
  end
  columns[#columns + 1] = { name = 'value', header = unit .. ' (± 95 % CI)' }
  for i, e in ipairs(opts.extra or {}) do
    columns[#columns + 1] = { name = 'x' .. i, header = e.header }
  end
  local rows = {}
  for _, p0 in ipairs(points) do
    local p = entry_stats(p0)
    local r = {}
    for _, k in ipairs(order) do r[k] = p.params[k] end
    r.value = M.mean_ci(p, scale, opts.digits)
    for i, e in ipairs(opts.extra or {}) do r['x' .. i] = e.value(p) end
    rows[#rows + 1] = r
  end
  return { title = opts.title, columns = columns, rows = rows }
end

--- A cell as `format_table` prints it: nil as "-", whole floats without a
-- fraction, other floats with 4 significant digits.
-- @function cell_text
-- @param v any value
-- @treturn string
M.cell_text = cell_text

return M
