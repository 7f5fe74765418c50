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

-- format_table's work, its errors named ctx. level as in check.fail (1 =
-- the caller of the function calling this): every public function passes
-- its own caller's position down, so no message points inside qoslab.
local function format_table(ctx, t, level)
  local L = level + 1
  check.table(ctx, 't', t, L)
  check.table(ctx, 't.columns', t.columns, L)
  check.table(ctx, 't.rows', t.rows, L)
  check.string(ctx, 't.title', t.title, nil, L)
  local cols = {}
  for i, c in ipairs(t.columns) do
    local field = 't.columns[' .. i .. ']'
    if type(c) == 'string' then c = { name = c } end
    if type(c) ~= 'table' or type(c.name) ~= 'string' then
      check.fail(ctx, field, 'a string or {name=...}', c, L)
    end
    check.string(ctx, field .. '.header', c.header, nil, L)
    check.enum(ctx, field .. '.align', c.align, { 'left', 'right' }, nil, L)
    cols[i] = { name = c.name, header = c.header or c.name, align = c.align or 'right' }
  end
  for r, row in ipairs(t.rows) do
    if type(row) ~= 'table' then check.fail(ctx, 't.rows[' .. r .. ']', 'a table (a row)', row, L) end
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

--- Format a table for the terminal.
-- @tparam table t `{title = string|nil, columns = {string | {name=, header=,
--   align = "left"|"right"}, ...}, rows = {row, ...}}`; a row is a list (by
--   column position) or a map (by column name); nil cells print as "-".
-- @treturn string the table, lines ending in "\n"
-- @raise when t is not of that shape, naming the field, at the caller's line
-- @usage io.write(report.format_table{columns = {'a', 'b'}, rows = {{1, 2}}})
function M.format_table(t)
  local s = format_table('qoslab.report.format_table', t, 1)
  return s
end

--- Print a table (format_table to stdout).
-- @tparam table t as for `format_table`
-- @raise as `format_table`
-- @usage report.print_table{columns = {'a', 'b'}, rows = {{1, 2}}}
function M.print_table(t) io.write(format_table('qoslab.report.print_table', t, 1)) end

local function sig(v, digits)
  if math.abs(v) >= 10 ^ digits then return string.format('%.0f', v) end
  return string.format('%.' .. digits .. 'g', v)
end

--- A number with `digits` significant digits, but never an exponent for
-- large values ("1000", not "1e+03").
-- @tparam number v
-- @tparam integer digits significant digits, 1..17
-- @treturn string
-- @raise when v is not a number or digits not such an integer
-- @usage report.sig(225.93, 3) --> "226"
function M.sig(v, digits)
  local ctx = 'qoslab.report.sig'
  if type(v) ~= 'number' then check.fail(ctx, 'v', 'a number', v) end
  if digits == nil then check.fail(ctx, 'digits', 'an integer in [1, 17]', nil) end
  return sig(v, check.integer(ctx, 'digits', digits, 1, 17))
end

--- A point's value as "mean ± ci" in a unit.
-- @tparam table p a point of a sweep summary
-- @tparam[opt=1] number scale divide values by this (1e6 for Mbit/s), a finite number > 0
-- @tparam[opt=3] integer digits significant digits of the mean
-- @treturn string "226 ± 2.1", "226" (n = 1), "stop" (skipped), "error", or "-"
-- @raise when p is neither a table nor nil, scale not a finite number > 0
--   or digits not an integer in [1, 17]
function M.mean_ci(p, scale, digits)
  local ctx = 'qoslab.report.mean_ci'
  if p ~= nil then check.table(ctx, 'p', p) end
  scale = check.positive(ctx, 'scale', scale, 1)
  digits = check.integer(ctx, 'digits', digits, 1, 17, 3)
  if p == nil then return '-' end
  if p.skipped then return 'stop' end
  if p.error then return 'error' end
  if p.mean == nil then return '-' end
  local s = sig(p.mean / scale, digits)
  if p.ci95 then s = s .. ' ± ' .. sig(p.ci95 / scale, 2) end
  return s
end

-- points: a list of sweep points (`summary.points`) or of plan.load's
-- records, each a table with a params table. level as in check.fail.
local function check_points(ctx, field, points, level)
  local L = level + 1
  check.table(ctx, field, points, L)
  for i, p in ipairs(points) do
    local f = field .. '[' .. i .. ']'
    if type(p) ~= 'table' then check.fail(ctx, f, 'a point (a table with params)', p, L) end
    if type(p.params) ~= 'table' then check.fail(ctx, f .. '.params', 'a table', p.params, L) end
  end
  return points
end

-- The points of a summary from plan.sweep (its `points`), or a list of
-- records from plan.load, given as the argument `field`. The value the
-- caller gave is the one described (5, not nil). level as in check.fail.
local function points_of(ctx, field, summary, level)
  local L = level + 1
  check.table(ctx, field, summary, L)
  local points
  if summary.points ~= nil then
    points = check_points(ctx, field .. '.points', summary.points, L)
  else
    points = check_points(ctx, field, summary, L)
  end
  return points
end
M._points_of = points_of

-- The parameter names of points, sorted; numeric: only those whose values
-- are all numbers.
local function param_names(points, numeric)
  local seen, out, other = {}, {}, {}
  for _, p in ipairs(points) do
    for k, v in pairs(p.params) do
      if not seen[k] then seen[k] = true out[#out + 1] = tostring(k) end
      if type(v) ~= 'number' then other[tostring(k)] = true end
    end
  end
  if numeric then
    local keep = {}
    for _, k in ipairs(out) do if not other[k] then keep[#keep + 1] = k end end
    out = keep
  end
  table.sort(out)
  return out
end

-- name must be a parameter of points (numeric: one with numbers for
-- values), else raise naming field and listing them. Points without any
-- parameter (an empty list) accept any name: there is nothing to show,
-- which is no caller's mistake. Returns name. level as in check.fail.
local function check_param(ctx, field, points, name, numeric, level)
  local L = level + 1
  if type(name) ~= 'string' then check.fail(ctx, field, 'a string (a parameter name)', name, L) end
  if #points == 0 then return name end
  local names = param_names(points, numeric)
  for _, n in ipairs(names) do if n == name then return name end end
  check.fail(ctx, field, string.format('a%s parameter of the sweep (%s)', numeric and ' numeric' or '',
    #names > 0 and table.concat(names, ', ') or 'none'), name, L)
end
M._check_param = check_param

-- opts.where: a table of parameter name -> value. level as in check.fail.
local function check_where(ctx, field, points, where, level)
  if where == nil then return {} end
  check.table(ctx, field, where, level + 1)
  for k in pairs(where) do check_param(ctx, field .. ' key', points, k, false, level + 1) end
  return where
end
M._check_where = check_where

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

-- Numbers and strings by their order, other values (booleans) by their
-- text, and mixed types by their text.
local function before(a, b)
  local ta = type(a)
  if ta == type(b) and (ta == 'number' or ta == 'string') then return a < b end
  return tostring(a) < tostring(b)
end

local function distinct(points, name)
  local seen, out = {}, {}
  for _, p in ipairs(points) do
    local v = p.params[name]
    if v ~= nil and not seen[v] then seen[v] = true out[#out + 1] = v end
  end
  table.sort(out, before)
  return out
end

--- The distinct values of one parameter over a sweep's points, sorted
-- (numbers numerically, strings alphabetically; other and mixed types by
-- their text).
-- @tparam {table,...} points sweep points (`summary.points`) or `plan.load` records
-- @tparam string name a parameter name
-- @treturn {any,...} the values (points without the parameter are skipped)
-- @raise when points is not such a list or name not a string
-- @usage report.distinct(s.points, 'delay_ms') --> {10, 100, 300}
function M.distinct(points, name)
  local ctx = 'qoslab.report.distinct'
  check_points(ctx, 'points', points, 1)
  if type(name) ~= 'string' then check.fail(ctx, 'name', 'a string (a parameter name)', name) end
  local out = distinct(points, name)
  return out
end

local MATRIX_KEYS = { row = true, col = true, row_label = true, col_label = true,
  scale = true, unit = true, digits = true, ci = true, title = true, where = true }

-- matrix_table's work, its errors named ctx. level as in check.fail.
local function matrix_table(ctx, summary, opts, level)
  local L = level + 1
  local points = points_of(ctx, 'summary', summary, L)
  check.table(ctx, 'opts', opts, L)
  check.keys(ctx, 'opts', opts, MATRIX_KEYS, L + 1)
  local row = check_param(ctx, 'opts.row', points, check.string(ctx, 'opts.row', opts.row, 'loss_pct', L),
    false, L)
  local col = check_param(ctx, 'opts.col', points, check.string(ctx, 'opts.col', opts.col, 'delay_ms', L),
    false, L)
  local scale = check.positive(ctx, 'opts.scale', opts.scale, 1e6, L)
  local unit = check.string(ctx, 'opts.unit', opts.unit, 'Mbit/s', L)
  local digits = check.integer(ctx, 'opts.digits', opts.digits, 1, 17, 3, L)
  local ci = check.boolean(ctx, 'opts.ci', opts.ci, false, L)
  local title = check.string(ctx, 'opts.title', opts.title, nil, L)
  local where = check_where(ctx, 'opts.where', points, opts.where, L)
  local rl = check.string(ctx, 'opts.row_label', opts.row_label, nil, L)
    or row:gsub('_pct$', ' %%'):gsub('_ms$', ' ms'):gsub('_', ' ')
  local cl = check.string(ctx, 'opts.col_label', opts.col_label, nil, L)
    or col:gsub('_pct$', ' %%'):gsub('_ms$', ' ms'):gsub('_', ' ')
  local sel = {}
  for _, p in ipairs(points) do
    local ok = true
    for k, v in pairs(where) do if p.params[k] ~= v then ok = false end end
    if ok then sel[#sel + 1] = entry_stats(p) end
  end
  local rows_v, cols_v = distinct(sel, row), distinct(sel, col)
  -- by the values themselves, as distinct tells them apart
  local cells = {}
  for _, p in ipairs(sel) do
    local r, c = p.params[row], p.params[col]
    if r ~= nil and c ~= nil then
      cells[r] = cells[r] or {}
      cells[r][c] = p
    end
  end
  local columns = { { name = 'row', header = rl .. ' \\ ' .. cl } }
  for i, c in ipairs(cols_v) do columns[i + 1] = { name = 'c' .. i, header = cell_text(c) } end
  local rows = {}
  for _, r in ipairs(rows_v) do
    local line = { cell_text(r) }
    for i, c in ipairs(cols_v) do
      local p = cells[r] and cells[r][c]
      if p == nil then
        line[i + 1] = ''
      elseif ci then
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
  return { title = (title and (title .. ' ') or '') .. '(' .. unit .. ')', columns = columns, rows = rows }
end

--- Matrix table of one value over two parameters (the reference's shape).
-- @tparam table summary from plan.sweep (or a list of records from plan.load)
-- @tparam table opts `{row = "loss_pct", col = "delay_ms", row_label = "loss %",
--   col_label = "delay ms", scale = 1e6, unit = "Mbit/s", digits = 3, ci = false,
--   title = string, where = {name = value} (fixes other parameters)}`; row,
--   col and where's names are parameters of the sweep; scale (the divisor
--   of each value) a finite number > 0
-- @treturn string the table
-- @raise on a summary that is not one, or bad options (an unknown key, a
--   wrong type, a row, col or where naming no parameter of the sweep, a
--   scale that is not a finite number > 0: `"qoslab.report.matrix:
--   opts.scale: expected a finite number > 0, got 0"`), naming the field,
--   at the caller's line
-- @usage io.write(report.matrix(s, {row = 'loss_pct', col = 'delay_ms'}))
function M.matrix(summary, opts)
  local ctx = 'qoslab.report.matrix'
  local s = format_table(ctx, matrix_table(ctx, summary, opts, 1), 1)
  return s
end

--- The table `matrix` prints, as data (for other renderings: the HTML report).
-- @tparam table summary as for `matrix`
-- @tparam table opts as for `matrix`
-- @tparam[opt] string ctx the function named in errors (default "qoslab.report.matrix_table")
-- @treturn table `{title =, columns = {{name =, header =}, ...}, rows = {{cell, ...}, ...}}`
--   (cells as text), as `format_table` takes
-- @raise as `matrix`
-- @usage local t = report.matrix_table(s, {row = 'loss_pct', col = 'delay_ms'})
function M.matrix_table(summary, opts, ctx)
  check.string('qoslab.report.matrix_table', 'ctx', ctx)
  local t = matrix_table(ctx or 'qoslab.report.matrix_table', summary, opts, 1)
  return t
end

-- rows' work, its errors named ctx, the summary named field. level as in
-- check.fail.
local function rows_of(ctx, field, summary, opts, level)
  local L = level + 1
  local points = points_of(ctx, field, summary, L)
  if opts ~= nil then check.table(ctx, 'opts', opts, L) end
  opts = opts or {}
  check.keys(ctx, 'opts', opts, { unit = true }, L + 1)
  local u = '_' .. check.string(ctx, 'opts.unit', opts.unit, 'bps', L)
  local order = summary.order
  if order ~= nil then
    check.table(ctx, field .. '.order', order, L)
  else
    order = param_names(points)
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

--- Flat rows of a sweep: one per point, parameters first, then statistics.
-- @tparam table summary from plan.sweep (or records from plan.load)
-- @tparam[opt] table opts `{unit = "bps"}`: suffix of the statistic columns
--   (mean_bps, stdev_bps, ci95_bps, ci_low_bps, ci_high_bps, min_bps, max_bps)
-- @treturn table `{columns = {...}, rows = {{name = value, ...}, ...}}`
-- @raise on a summary that is not one or bad options, naming the field, at
--   the caller's line
function M.rows(summary, opts)
  local t = rows_of('qoslab.report.rows', 'summary', summary, opts, 1)
  return t
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
-- @raise when path is not a string without NUL bytes, or t neither such a
--   table nor a summary, naming the field, at the caller's line
-- @usage report.write_csv('out/delay.csv', summary)
function M.write_csv(path, t)
  local ctx = 'qoslab.report.write_csv'
  if path == nil then check.fail(ctx, 'path', 'a string', nil) end
  check.cstring(ctx, 'path', path)
  check.table(ctx, 't', t)
  if t.points ~= nil or (type(t[1]) == 'table' and t[1].params ~= nil) then t = rows_of(ctx, 't', t, nil, 1) end
  check.table(ctx, 't.columns', t.columns)
  check.table(ctx, 't.rows', t.rows)
  local cols = {}
  for i, c in ipairs(t.columns) do
    cols[i] = type(c) == 'table' and c.name or c
    if type(cols[i]) ~= 'string' then check.fail(ctx, 't.columns[' .. i .. ']', 'a string or {name=...}', c) end
  end
  for r, row in ipairs(t.rows) do
    if type(row) ~= 'table' then check.fail(ctx, 't.rows[' .. r .. ']', 'a table (a row)', row) end
  end
  local f, err, errno = io.open(path, 'w')
  if not f then return nil, 'cannot write ' .. tostring(err), fs.errno_code(errno, err) end
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
-- @raise when path is not a string without NUL bytes, or on bad options,
--   naming the field, at the caller's line
function M.write_json(path, value, opts)
  local ctx = 'qoslab.report.write_json'
  if path == nil then check.fail(ctx, 'path', 'a string', nil) end
  check.cstring(ctx, 'path', path)
  if opts ~= nil then check.table(ctx, 'opts', opts) end
  opts = opts or {}
  check.keys(ctx, 'opts', opts, { results = true }, 2)
  check.boolean(ctx, 'opts.results', opts.results)
  if type(value) == 'table' and type(value.points) == 'table' and not opts.results then
    local v = {}
    for k, e in pairs(value) do v[k] = e end
    v.points = {}
    for i, p in ipairs(value.points) do
      local q = p
      if type(p) == 'table' then
        q = {}
        for k, e in pairs(p) do if k ~= 'results' then q[k] = e end end
      end
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

-- series_table's work, its errors named ctx. level as in check.fail.
local function series_table(ctx, summary, opts, level)
  local L = level + 1
  local points = points_of(ctx, 'summary', summary, L)
  if opts ~= nil then check.table(ctx, 'opts', opts, L) end
  opts = opts or {}
  check.keys(ctx, 'opts', opts, { title = true, scale = true, unit = true, digits = true,
    extra = true }, L + 1)
  local scale = check.positive(ctx, 'opts.scale', opts.scale, 1e6, L)
  local unit = check.string(ctx, 'opts.unit', opts.unit, 'Mbit/s', L)
  local digits = check.integer(ctx, 'opts.digits', opts.digits, 1, 17, 3, L)
  check.string(ctx, 'opts.title', opts.title, nil, L)
  local extra = opts.extra or {}
  check.table(ctx, 'opts.extra', extra, L)
  for i, e in ipairs(extra) do
    local field = 'opts.extra[' .. i .. ']'
    check.table(ctx, field, e, L)
    if type(e.header) ~= 'string' then check.fail(ctx, field .. '.header', 'a string', e.header, L) end
    if type(e.value) ~= 'function' then check.fail(ctx, field .. '.value', 'a function', e.value, L) end
  end
  local order = summary.order or {}
  check.table(ctx, 'summary.order', order, L)
  local columns = {}
  for i, k in ipairs(order) do
    columns[i] = { name = k, header = k:gsub('_pct$', ' %%'):gsub('_ms$', ' ms'):gsub('_bytes$', ' B'):gsub('_', ' ') }
  end
  columns[#columns + 1] = { name = 'value', header = unit .. ' (± 95 % CI)' }
  for i, e in ipairs(extra) do
    columns[#columns + 1] = { name = 'x' .. i, header = e.header }
  end
  local rows = {}
  for _, p0 in ipairs(points) do
    local p = entry_stats(p0)
    local r = {}
    for _, k in ipairs(order) do r[k] = p.params[k] end
    r.value = M.mean_ci(p, scale, digits)
    for i, e in ipairs(extra) do r['x' .. i] = e.value(p) end
    rows[#rows + 1] = r
  end
  return { title = opts.title, columns = columns, rows = rows }
end

--- A one-parameter table: each point with its value (mean ± CI) and extra columns.
-- @tparam table summary from plan.sweep (or a list of records from plan.load)
-- @tparam[opt] table opts `{title =, scale = 1e6, unit = "Mbit/s", digits = 3,
--   extra = {{header = string, value = function(point) -> value}, ...}}`;
--   scale (the divisor of each value) a finite number > 0
-- @treturn string
-- @raise on a summary that is not one or bad options, naming the field, at
--   the caller's line
-- @usage io.write(report.series(s, {unit = 'Mbit/s'}))
function M.series(summary, opts)
  local ctx = 'qoslab.report.series'
  local s = format_table(ctx, series_table(ctx, summary, opts, 1), 1)
  return s
end

--- The table `series` prints, as data (for other renderings: the HTML report).
-- @tparam table summary as for `series`
-- @tparam[opt] table opts as for `series`
-- @tparam[opt] string ctx the function named in errors (default "qoslab.report.series_table")
-- @treturn table `{title =, columns = {{name =, header =}, ...}, rows = {{name = value}, ...}}`
--   as `format_table` takes
-- @raise as `series`
function M.series_table(summary, opts, ctx)
  check.string('qoslab.report.series_table', 'ctx', ctx)
  local t = series_table(ctx or 'qoslab.report.series_table', summary, opts, 1)
  return t
end

--- A cell as `format_table` prints it: nil as "-", whole floats without a
-- fraction, other floats with 4 significant digits.
-- @function cell_text
-- @param v any value
-- @treturn string
M.cell_text = cell_text

return M
