-- qoslab.plot's sweep pictures: box plots over repetitions, the 3-D surface
-- only for a grid large enough to read, titles that say what was measured,
-- where and with which backend, cell labels above the contour lines, and
-- reference series (a window / RTT ceiling) drawn as bounds.
local plan = require 'qoslab.plan'
local plot = require 'qoslab.plot'
local demo = require 'qoslab.demo'

local function tmpdir()
  local p = assert(io.popen('mktemp -d /tmp/qoslab-plot-sweep-spec.XXXXXX'))
  local d = p:read('l')
  p:close()
  return d
end

local function slurp(path)
  local f = io.open(path, 'rb')
  if not f then return nil end
  local s = f:read('a')
  f:close()
  return s
end

local function assert_png(path)
  local s = assert(slurp(path), 'missing ' .. path)
  assert.is_true(#s > 5000, path .. ' is too small: ' .. #s)
  assert.equal('\137PNG\r\n\26\n', s:sub(1, 8))
end

-- A result as traffic.run gives it, as far as the plots read it.
local function result(bps)
  return { proto = 'tcp', host = '10.9.0.2', options = { netns = 'qlc-spec' }, received = { bits_per_second = bps } }
end

local function delay_sweep(reps, where, backend)
  local k = 0
  return plan.sweep { name = 'delay', progress = false, repeat_count = reps, where = where, backend = backend,
    params = { delay_ms = { 1, 10, 100 } },
    run = function(p)
      k = k + 1
      -- runs of a point: 100, 110, 120, 130 ... Mbit/s over 1 + delay/10
      return result((100 + 10 * ((k - 1) % reps)) * 1e6 / (1 + p.delay_ms / 10))
    end }
end

local function matrix(losses, delays)
  return plan.sweep { name = 'm', progress = false, params = { loss_pct = losses, delay_ms = delays },
    order = { 'loss_pct', 'delay_ms' },
    run = function(p) return result(1.22 * 1448 * 8 / (2 * p.delay_ms / 1000 * math.sqrt(p.loss_pct / 100)) * 5) end }
end

describe('qoslab.plot sweeps', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it('sweep_lines draws box plots over the repetitions when a point has more than one', function()
    local f = assert(plot.sweep_lines(delay_sweep(4), { out = dir .. '/d', x = 'delay_ms', formats = { 'png' } }))
    assert_png(f.png)
    local gp = assert(slurp(f.gp))
    assert.matches('with boxxyerror fs solid 0.25 border', gp, 1, true)
    assert.matches('keyentry with boxxyerror', gp, 1, true)
    assert.matches("title 'delay (line: mean)'", gp, 1, true)
    local dat = assert(slurp(f.dat))
    -- delay 1 ms: runs 100, 110, 120, 130 / 1.1 -> quartiles by interpolation
    local row = dat:match('\n1 [%d.e+-]+ [%d.e+-]+ [%d.e+-]+ ([^\n]+)')
    local v = {}
    for x in row:gmatch('[%d.e+-]+') do v[#v + 1] = tonumber(x) end
    local want = { 100, 107.5, 115, 122.5, 130 }
    for i = 1, 5 do assert.near(want[i] / 1.1, v[i], 1e-6) end
    assert.matches('every measurement', dat, 1, true)
    -- one run per point: no boxes, the CI bars as before
    local one = assert(plot.sweep_lines(delay_sweep(1), { out = dir .. '/one', x = 'delay_ms', formats = { 'png' } }))
    assert.is_nil(slurp(one.gp):find('boxxyerror', 1, true))
    -- sweep_box forces them; boxes = false turns them off
    local b = assert(plot.sweep_box(delay_sweep(1), { out = dir .. '/b', x = 'delay_ms', formats = { 'png' } }))
    assert.matches('keyentry with boxxyerror', slurp(b.gp), 1, true)
    local off = assert(plot.sweep_lines(delay_sweep(3), { out = dir .. '/off', x = 'delay_ms', boxes = false,
      formats = { 'png' } }))
    assert.is_nil(slurp(off.gp):find('boxxyerror', 1, true))
    assert.has_error(function() plot.sweep_box(delay_sweep(1), { out = dir .. '/x', boxes = false }) end)
  end)

  it('the x axis is labelled as the comparison page labels it: unit from the name, tics at the values', function()
    -- A sweep's own plot read `window_bytes` with gnuplot's tics (100000,
    -- 1e+06) where the comparison page of the same folders reads
    -- `window (bytes)` with 64 KiB ... 1 MiB; and the box legend's sample
    -- sat on the image's right edge.
    local k = 0
    local s = plan.sweep { name = 'window', progress = false, repeat_count = 3,
      params = { window_bytes = { 65536, 262144, 1048576 } },
      run = function(p) k = k + 1 return result(p.window_bytes * 800 * (1 + k % 3 / 10)) end }
    local f = assert(plot.sweep_lines(s, { out = dir .. '/w', x = 'window_bytes', logx = true, formats = { 'png' } }))
    assert_png(f.png)
    local gp = assert(slurp(f.gp))
    assert.matches("\nset xlabel 'window (bytes)'\n", gp, 1, true)
    assert.matches("\nset xtics ('64 KiB' 65536, '256 KiB' 262144, '1 MiB' 1048576)\n", gp, 1, true)
    -- samples left of their entries, the block centred below the plot
    assert.matches('\nset key below center reverse Left', gp, 1, true)
    -- the one function both use
    assert.equal('window (bytes)', plot.param_label('window_bytes'))
    assert.equal('loss (%)', plot.param_label('loss_pct'))
    assert.equal('one way delay (ms)', plot.param_label('one_way_delay_ms'))
    assert.equal('64 KiB', plot.param_tic_label('window_bytes', { 65536 })(65536))
    assert.equal('4', plot.param_tic_label('parallel', { 1, 2, 4 })(4))
    assert.is_nil(plot.param_tic_label('delay_ms', { 0.5, 1 }))
    -- integer values: tics at them; a label given wins
    local d = assert(plot.sweep_lines(delay_sweep(1), { out = dir .. '/d', x = 'delay_ms', xlabel = 'one-way delay (ms)',
      formats = { 'png' } }))
    gp = assert(slurp(d.gp))
    assert.matches("\nset xlabel 'one-way delay (ms)'\n", gp, 1, true)
    assert.matches("\nset xtics ('1' 1, '10' 10, '100' 100)\n", gp, 1, true)
  end)

  it('a failed point is marked at its x, and the axis keeps it in range', function()
    -- A sweep over parallel = {1, 2} whose point 1 failed drew a lone box at
    -- x = 2 on an axis 1.85-2.15 with tics 1.9, 1.95, ...: nothing said
    -- that x = 1 had been measured and failed.
    local k = 0
    local s = plan.sweep { name = 'repfail', progress = false, repeat_count = 3, on_error = 'record',
      params = { parallel = { 1, 2 } },
      run = function(p)
        k = k + 1
        if k == 2 then return nil, 'simulated failure', 'ECONNREFUSED' end
        return result(1e9 * p.parallel * (1 + k / 10))
      end }
    assert.is_string(s.points[1].error)
    local f = assert(plot.sweep_lines(s, { out = dir .. '/r', x = 'parallel', logx = false, formats = { 'png' } }))
    assert_png(f.png)
    local gp = assert(slurp(f.gp))
    assert.matches("\nset arrow from first 1, graph 0 to first 1, graph 1 nohead", gp, 1, true)
    assert.matches("\nset label 'failed' at first 1,", gp, 1, true)
    assert.matches("title 'failed: no result at this x'", gp, 1, true)
    assert.matches("\nset xtics ('1' 1, '2' 2)\n", gp, 1, true)
    local lo, hi = gp:match('\nset xrange %[([%d.e+-]+):([%d.e+-]+)%]')
    assert.is_true(tonumber(lo) < 1 and tonumber(hi) > 2, tostring(lo) .. ':' .. tostring(hi))
    -- no failure: no mark
    local ok = assert(plot.sweep_lines(delay_sweep(1), { out = dir .. '/ok', x = 'delay_ms', formats = { 'png' } }))
    assert.is_nil(slurp(ok.gp):find('failed', 1, true))
  end)

  it('titles say what was measured, where and with which backend', function()
    local f = assert(plot.sweep_lines(delay_sweep(1, 'guest', 'netem'), { out = dir .. '/t', x = 'delay_ms',
      title = 'TCP vs delay', formats = { 'png' } }))
    local gp = assert(slurp(f.gp))
    local want = 'TCP vs delay\nreceived TCP throughput · client netns qlc-spec → 10.9.0.2 · guest, netem'
    assert.equal(want, plot.measured_where(delay_sweep(1, 'guest', 'netem')) and ('TCP vs delay\n'
      .. plot.measured_where(delay_sweep(1, 'guest', 'netem'))))
    assert.equal('received TCP throughput · client netns qlc-spec → 10.9.0.2 · host, link',
      plot.measured_where(delay_sweep(1, 'host', 'link')))
    -- written as gnuplot's escaped string: every byte but letters and ./_- in octal
    local esc = '"' .. want:gsub('[^%a%./_%-]', function(c) return string.format('\\%03o', c:byte()) end) .. '"'
    assert.matches('set title ' .. esc, gp, 1, true)
    local nosub = assert(plot.sweep_lines(delay_sweep(1), { out = dir .. '/n', x = 'delay_ms', title = 'T',
      subtitle = false, formats = { 'png' } }))
    assert.matches("set title 'T'", slurp(nosub.gp), 1, true)
  end)

  it('sweep_matrix: a 2 x 3 grid gets the heat map alone, a 3 x 5 one the surface too', function()
    local small = assert(plot.sweep_matrix(matrix({ 1, 5 }, { 50, 200, 1000 }), { out = dir .. '/s',
      formats = { 'png' } }))
    assert_png(small.heatmap.png)
    assert.is_nil(small.surface)
    assert.is_nil(slurp(dir .. '/s-surface.png'))
    local big = assert(plot.sweep_matrix(matrix({ 1, 2, 5 }, { 50, 100, 200, 500, 1000 }), { out = dir .. '/b',
      formats = { 'png' } }))
    assert_png(big.surface.png)
    local forced = assert(plot.sweep_matrix(matrix({ 1, 5 }, { 50, 200, 1000 }), { out = dir .. '/f',
      surface = true, formats = { 'png' } }))
    assert_png(forced.surface.png)
  end)

  it('heat map: the cell labels are drawn after the contour lines, on a box', function()
    local r = assert(plot.sweep_matrix(matrix({ 1, 2, 5 }, { 50, 100, 200, 500, 1000 }), { out = dir .. '/h',
      formats = { 'png' } }))
    local gp = assert(slurp(r.heatmap.gp))
    local plotcmd = gp:match('\nplot (.-)\nunset output')
    local contour = plotcmd:find('contour1.dat', 1, true)
    local labels = plotcmd:find('with labels boxed', 1, true)
    assert.is_truthy(contour)
    assert.is_truthy(labels)
    assert.is_true(labels > contour)
    assert.matches('set style textbox opaque', gp, 1, true)
  end)

  it('the window plot: a dashed window / RTT ceiling and legends that say which buffer is x', function()
    local pts = {}
    for _, mode in ipairs { 'sndbuf', 'sndbuf+rcvbuf' } do
      for _, w in ipairs { 262144, 4194304 } do pts[#pts + 1] = { mode = mode, window_bytes = w } end
    end
    local s = plan.sweep { name = 'w', progress = false, points = pts,
      run = function(p) return result(math.min(p.window_bytes * 8 / 0.3, p.mode == 'sndbuf' and 6e7 or 1e9)) end }
    local ceiling = demo.window_ceiling({ 4194304, 262144 }, 0.3)
    assert.same({ { 262144, 262144 * 8 / 0.3 / 1e6 }, { 4194304, 4194304 * 8 / 0.3 / 1e6 } }, ceiling.points)
    local f = assert(plot.sweep_lines(s, { out = dir .. '/w', x = 'window_bytes', series = 'mode',
      series_title = demo.window_series_title, extra_series = { ceiling }, formats = { 'png' } }))
    assert_png(f.png)
    local gp = assert(slurp(f.gp))
    assert.matches("with lines dt 2 lw 2 lc 3 title 'ceiling: x / RTT (300 ms)'", gp, 1, true)
    assert.matches("title 'SO_SNDBUF = x on both ends, SO_RCVBUF left to autotuning'", gp, 1, true)
    assert.matches("title 'SO_SNDBUF = SO_RCVBUF = x on both ends'", gp, 1, true)
  end)
end)

-- plot.sweep_lines(s, {out = ..., x = 'nope'}) crashed inside qoslab
-- ("plot.lua:735: attempt to compare two nil values"); series = 'nope'
-- drew one series titled "nope = all"; sweep_matrix with an x or y the
-- sweep lacks failed with "table index is nil", without opts.out with
-- "attempt to concatenate a nil value". An option naming what the sweep
-- does not have now raises, listing the parameters it has, at the
-- caller's line.
describe('qoslab.plot sweep options naming a parameter, at the caller', function()
  local HERE = debug.getinfo(1, 'S').short_src
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)
  -- f calls the plot function on the line `raises` is called from; the
  -- message must start with this file's name and that line.
  local function raises(f, expected)
    local line = debug.getinfo(2, 'l').currentline
    local ok, err = pcall(f)
    assert.is_false(ok, 'expected an error: ' .. expected)
    assert.equal(HERE .. ':' .. line .. ': ' .. expected, tostring(err))
  end
  local function files_in(d)
    local p = assert(io.popen("ls -A '" .. d .. "'"))
    local s = p:read('a')
    p:close()
    return s
  end

  it('sweep_lines and sweep_box: x, series, where', function()
    local s = matrix({ 1, 5 }, { 50, 200 })
    local o = dir .. '/sl'
    raises(function() local f = plot.sweep_lines(s, { out = o, x = 'nope' }) return f end,
      'qoslab.plot.sweep_lines: opts.x: expected a numeric parameter of the sweep (delay_ms, loss_pct), '
      .. 'got string "nope"')
    raises(function() local f = plot.sweep_lines(s, { out = o, series = 'nope' }) return f end,
      'qoslab.plot.sweep_lines: opts.series: expected a parameter of the sweep (delay_ms, loss_pct), '
      .. 'got string "nope"')
    raises(function() local f = plot.sweep_lines(s, { out = o, where = { rate = 1 } }) return f end,
      'qoslab.plot.sweep_lines: opts.where key: expected a parameter of the sweep (delay_ms, loss_pct), '
      .. 'got string "rate"')
    raises(function() local f = plot.sweep_box(s, { out = o, x = 'nope' }) return f end,
      'qoslab.plot.sweep_box: opts.x: expected a numeric parameter of the sweep (delay_ms, loss_pct), '
      .. 'got string "nope"')
    -- x must have numbers for values: a string parameter is a series, not an axis
    local modes = plan.sweep { name = 'w', progress = false, params = { mode = { 'a', 'b' }, window_bytes = { 1, 2 } },
      run = function(p) return p.window_bytes * 1e6 end }
    raises(function() local f = plot.sweep_lines(modes, { out = o, x = 'mode' }) return f end,
      'qoslab.plot.sweep_lines: opts.x: expected a numeric parameter of the sweep (window_bytes), got string "mode"')
    raises(function() local f = plot.sweep_lines(s, { out = o, x = 'delay_ms', formats = { 'jpg' } }) return f end,
      'qoslab.plot.sweep_lines: opts.formats[1]: expected "png" or "svg", got string "jpg"')
    raises(function() local f = plot.sweep_lines(s, { out = o, hlines = { { title = 'link' } } }) return f end,
      'qoslab.plot.sweep_lines: opts.hlines[1].y: expected a number, got nil')
    raises(function() local f = plot.sweep_lines(5, { out = o }) return f end,
      'qoslab.plot.sweep_lines: summary: expected a table, got 5')
    assert.equal('', files_in(dir))
    -- a series that exists still works
    assert(plot.sweep_lines(modes, { out = o, x = 'window_bytes', series = 'mode', logx = false, formats = { 'png' } }))
  end)

  it('sweep_matrix: x, y, out', function()
    local s = matrix({ 1, 5 }, { 50, 200 })
    local o = dir .. '/m'
    raises(function() local f = plot.sweep_matrix(s, { out = o, x = 'nope' }) return f end,
      'qoslab.plot.sweep_matrix: opts.x: expected a numeric parameter of the sweep (delay_ms, loss_pct), '
      .. 'got string "nope"')
    raises(function() local f = plot.sweep_matrix(s, { out = o, y = 'loss' }) return f end,
      'qoslab.plot.sweep_matrix: opts.y: expected a numeric parameter of the sweep (delay_ms, loss_pct), '
      .. 'got string "loss"')
    raises(function() local f = plot.sweep_matrix(s, { out = o, x = 'loss_pct' }) return f end,
      'qoslab.plot.sweep_matrix: opts.y: expected a parameter other than opts.x, got string "loss_pct"')
    raises(function() local f = plot.sweep_matrix(s, {}) return f end,
      'qoslab.plot.sweep_matrix: opts.out: expected a path without extension, got nil')
    raises(function() local f = plot.sweep_matrix(s, { out = o, contours_bps = { 'x' } }) return f end,
      'qoslab.plot.sweep_matrix: opts.contours_bps[1]: expected a finite number in [-inf, inf], got string "x"')
    local one = matrix({ 1, 5 }, { 50 })
    raises(function() local f = plot.sweep_matrix(one, { out = o }) return f end,
      'qoslab.plot.sweep_matrix: opts.x: expected a parameter with 2 values or more (the heat map\'s columns), '
      .. 'got string "delay_ms"')
    assert.equal('', files_in(dir))
  end)
end)
