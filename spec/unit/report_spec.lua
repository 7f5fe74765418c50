-- qoslab.report: terminal tables, the reference-shaped matrix, CSV and JSON
-- files that parse back exactly.
local plan = require 'qoslab.plan'
local report = require 'qoslab.report'

local function tmpdir()
  local p = assert(io.popen('mktemp -d /tmp/qoslab-report-spec.XXXXXX'))
  local d = p:read('l')
  p:close()
  return d
end

local function matrix_sweep(out)
  return plan.sweep { name = 'matrix', progress = false, out = out,
    params = { loss_pct = { 1, 5 }, delay_ms = { 50, 100, 200 } }, order = { 'loss_pct', 'delay_ms' },
    repeat_count = 2,
    run = function(p, ctx) return 1e8 / (p.delay_ms * p.loss_pct) + (ctx.repetition - 1.5) * 2e4 end,
    stop_row = function(_, s) return s.mean < 500e3 end }
end

describe('qoslab.report', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it('format_table aligns left on request and prints nil as "-"', function()
    local s = report.format_table { title = 'T', columns = { 'a', { name = 'b', header = 'bee', align = 'left' } },
      rows = { { 1, 'x' }, { a = 22.5 }, { 333, 'yy' } } }
    assert.equal('T\n   a | bee\n-----+----\n   1 | x  \n22.5 | -  \n 333 | yy \n', s)
  end)

  it('format_table output is exact', function()
    local s = report.format_table { columns = { 'n', 'name' }, rows = { { 1, 'ab' }, { 10, 'c' } } }
    assert.equal(' n | name\n---+-----\n 1 |   ab\n10 |    c\n', s)
  end)

  it('matrix has rows = loss, columns = delay, units in the headers, stop for skipped cells', function()
    local s = matrix_sweep()
    local t = report.matrix(s, { row = 'loss_pct', col = 'delay_ms', row_label = 'loss %',
      col_label = 'delay ms', title = 'TCP throughput' })
    assert.equal(table.concat({
      'TCP throughput (Mbit/s)',
      'loss % \\ delay ms |  50 |  100 |  200',
      '------------------+-----+------+-----',
      '                1 |   2 |    1 |  0.5',
      '                5 | 0.4 | stop | stop',
    }, '\n') .. '\n', t)
    local ci = report.matrix(s, { row = 'loss_pct', col = 'delay_ms', ci = true, digits = 2 })
    -- repetitions are mean ± 0.01 Mbit/s: stdev = 0.01·√2, ci95 = t(0.975, 1) · stdev / √2
    -- = 12.706204736 · 0.01 = 0.127 Mbit/s
    assert.matches('|   2 ± 0.13 |', ci, 1, true)
    assert.matches('| 0.4 ± 0.13 |     stop |', ci, 1, true)
  end)

  it('mean_ci formats mean ± CI, n = 1, skipped and failed points', function()
    assert.equal('226 ± 2.1', report.mean_ci({ mean = 226.1e6, ci95 = 2.1e6 }, 1e6))
    assert.equal('226', report.mean_ci({ mean = 226.1e6 }, 1e6))
    assert.equal('stop', report.mean_ci({ skipped = true }))
    assert.equal('error', report.mean_ci({ error = 'x' }))
  end)

  it('CSV written from a sweep parses back exactly', function()
    local s = matrix_sweep()
    local path = dir .. '/m.csv'
    assert.is_true(report.write_csv(path, s))
    local back = assert(report.read_csv(path))
    assert.same({ 'loss_pct', 'delay_ms', 'n', 'mean_bps', 'stdev_bps', 'ci95_bps', 'ci_low_bps',
                  'ci_high_bps', 'min_bps', 'max_bps', 'skipped', 'error' }, back.columns)
    assert.equal(6, #back.rows)
    for i, p in ipairs(s.points) do
      local r = back.rows[i]
      assert.equal(p.params.loss_pct, r.loss_pct)
      assert.equal(p.params.delay_ms, r.delay_ms)
      assert.equal(p.mean, r.mean_bps)
      assert.equal(p.stdev, r.stdev_bps)
      assert.equal(p.ci95, r.ci95_bps)
      assert.equal(p.skipped and true or false, r.skipped)
    end
  end)

  it('CSV quoting survives commas, quotes, newlines; floats are exact', function()
    local t = { columns = { 'name', 'value', 'count' }, rows = {
      { 'a,b', 1 / 3, 7 }, { 'say "hi"', 1e-300, -2 }, { 'two\nlines', 0.1, 0 }, { '', 2 ^ 60, nil } } }
    local path = dir .. '/q.csv'
    assert.is_true(report.write_csv(path, t))
    local back = assert(report.read_csv(path))
    assert.same({ 'name', 'value', 'count' }, back.columns)
    assert.same({ name = 'a,b', value = 1 / 3, count = 7 }, back.rows[1])
    assert.same({ name = 'say "hi"', value = 1e-300, count = -2 }, back.rows[2])
    assert.same({ name = 'two\nlines', value = 0.1, count = 0 }, back.rows[3])
    assert.equal(2 ^ 60, back.rows[4].value)
    assert.is_nil(back.rows[4].count)
  end)

  it('JSON written from a sweep parses back exactly (raw results left out unless asked)', function()
    local s = matrix_sweep()
    local path = dir .. '/m.json'
    assert.is_true(report.write_json(path, s))
    local back = assert(report.read_json(path))
    assert.equal('matrix', back.name)
    assert.same({ 'loss_pct', 'delay_ms' }, back.order)
    for i, p in ipairs(s.points) do
      assert.equal(p.mean, back.points[i].mean)
      assert.equal(p.ci95, back.points[i].ci95)
      assert.same(p.params, back.points[i].params)
      assert.is_nil(back.points[i].results)
    end
    assert.is_true(report.write_json(path, s, { results = true }))
    back = assert(report.read_json(path))
    assert.equal(s.points[1].results[2], back.points[1].results[2])
  end)

  it('write_csv / read_json report failures as nil, message, CODE', function()
    local ok, msg, code = report.write_csv('/nonexistent-dir/x.csv', { columns = { 'a' }, rows = {} })
    assert.is_nil(ok)
    assert.matches('cannot write', msg)
    assert.equal('ENOENT', code)
    local f = assert(io.open(dir .. '/bad.json', 'w'))
    f:write('{not json')
    f:close()
    local v, m2, c2 = report.read_json(dir .. '/bad.json')
    assert.is_nil(v)
    assert.matches('bad.json', m2)
    assert.equal('EINVAL', c2)
  end)

  -- Codes came out as ENOENT for ENOTDIR and EROFS; read_csv of a directory
  -- raised "attempt to get length of a nil value"; a FIFO would block.
  it('failure codes follow the errno; a directory or FIFO is refused when read', function()
    assert(io.open(dir .. '/afile', 'w')):close()
    local ok, msg, code = report.write_csv(dir .. '/afile/x.csv', { columns = { 'a' }, rows = {} })
    assert.is_nil(ok)
    assert.equal('ENOTDIR', code)
    assert.matches('Not a directory', msg, 1, true)
    ok, msg, code = report.write_json(dir .. '/' .. ('n'):rep(300), {})
    assert.is_nil(ok)
    assert.equal('ENAMETOOLONG', code, msg)
    local v, m2, c2 = report.read_csv(dir)
    assert.is_nil(v)
    assert.equal('EISDIR', c2, m2)
    assert(os.execute("mkfifo '" .. dir .. "/fifo'"))
    v, m2, c2 = report.read_json(dir .. '/fifo')
    assert.is_nil(v)
    assert.equal('EFTYPE', c2, m2)
    v, m2, c2 = report.read_csv(dir .. '/fifo')
    assert.is_nil(v)
    assert.equal('EFTYPE', c2, m2)
  end)

  it('works on records read back from results.jsonl', function()
    matrix_sweep(dir)
    local recs = assert(plan.load(dir .. '/results.jsonl', 'matrix'))
    local t = report.matrix(recs, { row = 'loss_pct', col = 'delay_ms' })
    assert.matches('5 | 0.4 | stop | stop', t, 1, true)
    local rows = report.rows(recs)
    assert.equal(6, #rows.rows)
    assert.same({ 'delay_ms', 'loss_pct' }, { rows.columns[1], rows.columns[2] })
  end)

  it('series lists each point with mean ± CI and extra columns', function()
    local s = plan.sweep { name = 'd', progress = false, params = { delay_ms = { 1, 10 } },
      run = function(p) return 1e9 / p.delay_ms end }
    local t = report.series(s, { title = 'delay', extra = { { header = 'x2', value = function(e) return e.params.delay_ms * 2 end } } })
    assert.equal(table.concat({
      'delay',
      'delay ms | Mbit/s (± 95 % CI) | x2',
      '---------+--------------------+---',
      '       1 |               1000 |  2',
      '      10 |                100 | 20',
    }, '\n') .. '\n', t)
  end)
end)

-- report.series(s, {scale = 'x'}) raised at report.lua:445 (series_table's
-- checks counted from series, inside qoslab), and report.series(5) said
-- "summary: expected a table, got nil" (the summary's points, not the
-- value given). matrix, rows, write_csv and write_json had the same
-- faults, and an opts that was no table, an unknown key of write_json's
-- or mean_ci(5) failed inside qoslab. Each entry point now raises at its
-- caller's line, describing the value it got.
describe('qoslab.report argument errors, at the caller', function()
  local HERE = debug.getinfo(1, 'S').short_src
  -- f calls the function on the line `raises` is called from; the message
  -- must start with this file's name and that line.
  local function raises(f, expected)
    local line = debug.getinfo(2, 'l').currentline
    local ok, err = pcall(f)
    assert.is_false(ok, 'expected an error: ' .. expected)
    assert.equal(HERE .. ':' .. line .. ': ' .. expected, tostring(err))
  end
  local s = plan.sweep { name = 'm', progress = false, params = { loss_pct = { 1, 5 }, delay_ms = { 50, 100 } },
    run = function(p) return 1e6 / p.delay_ms end }

  it('series and series_table', function()
    raises(function() local t = report.series(s, { scale = 'x' }) return t end,
      'qoslab.report.series: opts.scale: expected a finite number > 0, got string "x"')
    raises(function() local t = report.series(5) return t end, 'qoslab.report.series: summary: expected a table, got 5')
    raises(function() local t = report.series({ points = 'p' }) return t end,
      'qoslab.report.series: summary.points: expected a table, got string "p"')
    raises(function() local t = report.series({ points = { 7 } }) return t end,
      'qoslab.report.series: summary.points[1]: expected a point (a table with params), got 7')
    raises(function() local t = report.series(s, 'Mbit/s') return t end,
      'qoslab.report.series: opts: expected a table, got string "Mbit/s"')
    raises(function() local t = report.series(s, { colour = 1 }) return t end,
      'qoslab.report.series: opts.colour: unknown key (known keys: digits, extra, scale, title, unit)')
    raises(function() local t = report.series(s, { extra = { { header = 'h' } } }) return t end,
      'qoslab.report.series: opts.extra[1].value: expected a function, got nil')
    raises(function() local t = report.series_table(s, { digits = 0 }) return t end,
      'qoslab.report.series_table: opts.digits: expected an integer in [1, 17], got 0')
  end)

  it('matrix and matrix_table', function()
    raises(function() local t = report.matrix(5, {}) return t end, 'qoslab.report.matrix: summary: expected a table, got 5')
    raises(function() local t = report.matrix(s, { bogus = 1 }) return t end,
      'qoslab.report.matrix: opts.bogus: unknown key (known keys: ci, col, col_label, digits, row, row_label, '
      .. 'scale, title, unit, where)')
    raises(function() local t = report.matrix(s, { row = 'loss' }) return t end,
      'qoslab.report.matrix: opts.row: expected a parameter of the sweep (delay_ms, loss_pct), got string "loss"')
    raises(function() local t = report.matrix(s, { where = { rate_bps = 1 } }) return t end,
      'qoslab.report.matrix: opts.where key: expected a parameter of the sweep (delay_ms, loss_pct), '
      .. 'got string "rate_bps"')
    raises(function() local t = report.matrix(s, { title = {} }) return t end,
      'qoslab.report.matrix: opts.title: expected a string, got table')
    raises(function() local t = report.matrix_table(s, { col = 5 }) return t end,
      'qoslab.report.matrix_table: opts.col: expected a string, got 5')
  end)

  -- report.matrix(s, {scale = 0}) printed inf in every cell: the check
  -- took a scale in [0, inf], but a scale divides each value.
  it('a scale that divides must be a finite number > 0, in every function that takes one', function()
    local pos = 'expected a finite number > 0, got '
    raises(function() local t = report.matrix(s, { row = 'loss_pct', col = 'delay_ms', scale = 0 }) return t end,
      'qoslab.report.matrix: opts.scale: ' .. pos .. '0')
    raises(function() local t = report.matrix(s, { scale = -1e6 }) return t end,
      'qoslab.report.matrix: opts.scale: ' .. pos .. '-1000000')
    raises(function() local t = report.matrix(s, { scale = 1 / 0 }) return t end,
      'qoslab.report.matrix: opts.scale: ' .. pos .. 'inf')
    raises(function() local t = report.matrix(s, { scale = 0 / 0 }) return t end,
      'qoslab.report.matrix: opts.scale: ' .. pos .. 'nan')
    raises(function() local t = report.matrix_table(s, { scale = 0 }) return t end,
      'qoslab.report.matrix_table: opts.scale: ' .. pos .. '0')
    raises(function() local t = report.series(s, { scale = 0 }) return t end,
      'qoslab.report.series: opts.scale: ' .. pos .. '0')
    raises(function() local t = report.series_table(s, { scale = 0.0 }) return t end,
      'qoslab.report.series_table: opts.scale: ' .. pos .. '0')
    raises(function() local t = report.mean_ci({ mean = 1 }, 0) return t end,
      'qoslab.report.mean_ci: scale: ' .. pos .. '0')
    local plot = require 'qoslab.plot'
    raises(function() local f = plot.sweep_lines(s, { out = '/nonexistent/x', scale = 0 }) return f end,
      'qoslab.plot.sweep_lines: opts.scale: ' .. pos .. '0')
    raises(function() local f = plot.sweep_box(s, { out = '/nonexistent/x', scale = 0 }) return f end,
      'qoslab.plot.sweep_box: opts.scale: ' .. pos .. '0')
    raises(function() local f = plot.sweep_matrix(s, { out = '/nonexistent/x', scale = 0 }) return f end,
      'qoslab.plot.sweep_matrix: opts.scale: ' .. pos .. '0')
    -- a small scale is still one
    assert.equal('1000', report.mean_ci({ mean = 1 }, 1e-3))
  end)

  it('rows, write_csv, write_json, format_table, print_table, mean_ci, sig, distinct', function()
    raises(function() local t = report.rows(5) return t end, 'qoslab.report.rows: summary: expected a table, got 5')
    raises(function() local t = report.rows(s, 5) return t end, 'qoslab.report.rows: opts: expected a table, got 5')
    raises(function() local t = report.rows(s, { units = 'x' }) return t end,
      'qoslab.report.rows: opts.units: unknown key (known keys: unit)')
    raises(function() local ok = report.write_csv('/tmp/never.csv', { points = { 1 } }) return ok end,
      'qoslab.report.write_csv: t.points[1]: expected a point (a table with params), got 1')
    raises(function() local ok = report.write_csv('/tmp/never.csv', { columns = { 'a' }, rows = { 1 } }) return ok end,
      'qoslab.report.write_csv: t.rows[1]: expected a table (a row), got 1')
    raises(function() local ok = report.write_json('/tmp/never.json', s, { result = true }) return ok end,
      'qoslab.report.write_json: opts.result: unknown key (known keys: results)')
    raises(function() local ok = report.write_json('/tmp/never.json', s, 'all') return ok end,
      'qoslab.report.write_json: opts: expected a table, got string "all"')
    raises(function() local t = report.format_table { columns = { 'a' }, rows = { 5 } } return t end,
      'qoslab.report.format_table: t.rows[1]: expected a table (a row), got 5')
    raises(function() report.print_table { columns = { { name = 'a', align = 'centre' } }, rows = {} } end,
      'qoslab.report.print_table: t.columns[1].align: expected one of "left", "right", got string "centre"')
    raises(function() local t = report.mean_ci(5) return t end, 'qoslab.report.mean_ci: p: expected a table, got 5')
    raises(function() local t = report.sig('x', 3) return t end, 'qoslab.report.sig: v: expected a number, got string "x"')
    raises(function() local t = report.distinct({ 5 }, 'a') return t end,
      'qoslab.report.distinct: points[1]: expected a point (a table with params), got 5')
    raises(function() local t = report.distinct(s.points) return t end,
      'qoslab.report.distinct: name: expected a string (a parameter name), got nil')
    assert.is_nil(io.open('/tmp/never.csv'))
    assert.is_nil(io.open('/tmp/never.json'))
  end)

  it('a sweep with boolean or string values', function()
    local b = plan.sweep { name = 'b', progress = false, params = { on = { true, false }, mode = { 'x', 'y' } },
      run = function(p) return p.on and 2e6 or 1e6 end }
    assert.equal(table.concat({
      '(Mbit/s)',
      'on \\ mode | x | y',
      '----------+---+--',
      '    false | 1 | 1',
      '     true | 2 | 2',
    }, '\n') .. '\n', report.matrix(b, { row = 'on', col = 'mode' }))
    assert.same({ false, true }, report.distinct(b.points, 'on'))
  end)
end)
