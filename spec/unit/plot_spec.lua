-- qoslab.plot: gnuplot renders valid, non-empty PNG and SVG files; the data
-- files come first and stay when gnuplot is missing.
local plan = require 'qoslab.plan'
local plot = require 'qoslab.plot'
local fs_cwd = require('qoslab.fs').cwd()

local function tmpdir()
  local p = assert(io.popen('mktemp -d /tmp/qoslab-plot-spec.XXXXXX'))
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

local PNG_MAGIC = '\137PNG\r\n\26\n'

local function assert_png(path)
  local s = assert(slurp(path), 'missing ' .. path)
  assert.is_true(#s > 2000, path .. ' is too small: ' .. #s)
  assert.equal(PNG_MAGIC, s:sub(1, 8))
  -- IHDR: width and height, big-endian, right after the magic and chunk header.
  local w, h = string.unpack('>I4I4', s, 17)
  assert.is_true(w >= 600 and h >= 400)
end

local function assert_svg(path)
  local s = assert(slurp(path), 'missing ' .. path)
  assert.is_true(#s > 2000)
  assert.matches('^<%?xml', s)
  assert.matches('<svg', s)
  assert.matches('</svg>%s*$', s)
end

local function matrix_summary()
  return plan.sweep { name = 'loss x delay', progress = false,
    params = { loss_pct = { 1, 2, 5 }, delay_ms = { 50, 100, 200, 500, 1000 } }, order = { 'loss_pct', 'delay_ms' },
    run = function(p) return 1.22 * 1448 * 8 / (2 * p.delay_ms / 1000 * math.sqrt(p.loss_pct / 100)) * 5 end,
    stop_row = function(_, s) return s.mean < 500e3 end }
end

describe('qoslab.plot', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it('finds gnuplot on this machine', function()
    assert.is_string(plot.gnuplot())
  end)

  it('lines: PNG and SVG, log x, error bars, reference line', function()
    local files = assert(plot.lines { out = dir .. '/delay', title = 'TCP vs delay',
      xlabel = 'one-way delay (ms)', ylabel = 'throughput (Mbit/s)',
      series = { { title = 'a', points = { { 1, 900, 10 }, { 10, 500, 20 }, { 100, 50, 5 } } },
                 { title = 'b', points = { { 1, 800 }, { 100, 80 } } } },
      hlines = { { y = 1000, title = 'link' } } })
    assert_png(files.png)
    assert_svg(files.svg)
    local dat = assert(slurp(files.dat))
    assert.matches('# a\n# x y err\n1 900 10\n10 500 20\n100 50 5\n', dat, 1, true)
    local gp = assert(slurp(files.gp))
    assert.matches('set logscale x', gp, 1, true)
    assert.matches("set xlabel 'one-way delay (ms)'", gp, 1, true)
    assert.matches("set title 'TCP vs delay'", gp, 1, true)
  end)

  it('sweep_matrix: heat map and surface with contour lines', function()
    local r = assert(plot.sweep_matrix(matrix_summary(), { out = dir .. '/m', title = 'matrix',
      xlabel = 'one-way delay (ms)', ylabel = 'loss (%)', contours_bps = { 500e3, 1e6 } }))
    assert_png(r.heatmap.png)
    assert_svg(r.heatmap.svg)
    assert_png(r.surface.png)
    assert_svg(r.surface.svg)
    -- Contour tables were computed and are non-empty (the data crosses both levels).
    for k = 1, 2 do
      local c = assert(slurp(dir .. '/m-heatmap.contour' .. k .. '.dat'))
      assert.matches('\n%s*[%d.]+%s+[%d.]+%s+[%d.]+', c)
    end
    -- Skipped cells are drawn as "stop".
    assert.matches('"stop"', assert(slurp(dir .. '/m-heatmap.dat')))
  end)

  it('skipped cells: no surface and no contour line there, and they are marked', function()
    -- Row y=5 was stopped after x=50; the value there (1.01) is close to the
    -- 1.0 contour, so a line traced through a filled-in cell would cross into it.
    local xs, ys = { 1, 10, 50, 100, 300 }, { 1, 5 }
    local z = { { 70, 7, 1.4, 0.97, 0.6 }, { 31, 3.2, 1.01, nil, nil } }
    local s = assert(plot.surface { out = dir .. '/s', xs = xs, ys = ys, z = z, contours = { 1 }, formats = { 'png' } })
    assert_png(s.png)
    local dat = assert(slurp(s.dat))
    assert.matches('\n100 5 NaN\n300 5 NaN\n', dat, 1, true)
    assert.equal('# x y  (skipped by the stop rule)\n100 5\n300 5\n', slurp(dir .. '/s.stop.dat'))
    assert.matches("s.stop.dat' using 1:2:(", assert(slurp(s.gp)), 1, true)
    assert.matches("title 'skipped (stop rule)'", slurp(s.gp), 1, true)
    local h = assert(plot.heatmap { out = dir .. '/h', xs = xs, ys = ys, z = z, contours = { 1 }, formats = { 'png' } })
    assert_png(h.png)
    local gp = assert(slurp(h.gp))
    assert.matches('skipped(x, y) = (abs(x-3)<=0.5 && abs(y-1)<=0.5) || (abs(x-4)<=0.5 && abs(y-1)<=0.5)', gp, 1, true)
    assert.matches("h.contour1.dat' using 1:(skipped($1, $2) ? NaN : $2) with lines", gp, 1, true)
    -- The traced line does enter the skipped cell (x index 3, y index 1), so
    -- the clipping above is what keeps it out of the grey.
    local entered = false
    for x, y in assert(slurp(dir .. '/h.contour1.dat')):gmatch('\n%s*([%d.e+-]+)%s+([%d.e+-]+)%s+[%d.e+-]+') do
      if math.abs(tonumber(x) - 3) <= 0.5 and math.abs(tonumber(y) - 1) <= 0.5 then entered = true end
    end
    assert.is_true(entered)
  end)

  it('sweep_lines: one series per value of a parameter', function()
    local s = plan.sweep { name = 'w', progress = false,
      params = { window_bytes = { 65536, 1048576 }, delay_ms = { 10, 100 } },
      run = function(p) return p.window_bytes * 8 / (p.delay_ms / 1000) end }
    local files = assert(plot.sweep_lines(s, { out = dir .. '/w', x = 'delay_ms', series = 'window_bytes',
      series_title = function(w) return plot.bytes_label(w) end }))
    assert_png(files.png)
    local dat = assert(slurp(files.dat))
    assert.matches('# 64 KiB', dat, 1, true)
    assert.matches('# 1 MiB', dat, 1, true)
  end)

  it('rejects bad options naming the field', function()
    assert.has_error(function() plot.lines { out = dir .. '/x', series = {}, bogus = 1 } end)
    assert.has_error(function() plot.lines { series = {} } end,
      'qoslab.plot.lines: opts.out: expected a path without extension, got nil')
    assert.has_error(function() plot.lines { out = dir .. '/x', series = {}, formats = { 'gif' } } end,
      'qoslab.plot.lines: opts.formats[1]: expected "png" or "svg", got string "gif"')
  end)

  it('without gnuplot: nil, message, "ENOENT", and the data files are written', function()
    local script = dir .. '/nognuplot.lua'
    local f = assert(io.open(script, 'w'))
    f:write([[
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path
local plot = require 'qoslab.plot'
local dir = ...
local ok, msg, code = plot.lines { out = dir .. '/l', series = { { title = 's', points = { { 1, 2 }, { 2, 3 } } } } }
local h, hmsg, hcode = plot.heatmap { out = dir .. '/h', xs = { 1, 2 }, ys = { 1 }, z = { { 5, 6 } }, contours = { 5.5 } }
io.write(tostring(ok), '|', msg, '|', code, '|', tostring(h), '|', hmsg, '|', hcode)
]])
    f:close()
    local p = assert(io.popen('env PATH=/nonexistent /usr/bin/lua5.4 ' .. script .. ' ' .. dir .. ' 2>&1'))
    local outp = p:read('a')
    p:close()
    assert.equal('nil|gnuplot not found: apt-get install gnuplot-nox|ENOENT|'
      .. 'nil|gnuplot not found: apt-get install gnuplot-nox|ENOENT', outp)
    assert.equal('# s\n# x y err\n1 2 0\n2 3 0\n\n\n', slurp(dir .. '/l.dat'))
    assert.is_string(slurp(dir .. '/l.gp'))
    assert.matches('0 0 5 "5"', assert(slurp(dir .. '/h.dat')), 1, true)
    assert.is_nil(slurp(dir .. '/l.png'))
  end)

  it('renders a relative out with a folder, and paths with shell syntax, without a shell', function()
    -- Run from dir: gnuplot used to start in out's folder, where "sub/x.gp"
    -- is not ("Cannot load input from 'sub/x.gp'").
    local script = dir .. '/relative.lua'
    local f = assert(io.open(script, 'w'))
    f:write(string.format([[
package.path = %q .. package.path
package.cpath = %q .. package.cpath
local plot = require 'qoslab.plot'
-- the folders first: a plot makes none
assert(require('qoslab.fs').mkdir_p('sub'))
assert(require('qoslab.fs').mkdir_p("q'$(touch pwned)`touch pwned`"))
local a = assert(plot.lines { out = 'sub/x', series = { { title = 's', points = { { 1, 2 }, { 2, 3 } } } } })
local b = assert(plot.lines { out = "q'$(touch pwned)`touch pwned`/y", series = { { title = 's', points = { { 1, 2 }, { 2, 3 } } } } })
io.write(a.png, ' ', a.svg, ' ', b.png)
]], fs_cwd .. '/lua/?.lua;' .. fs_cwd .. '/lua/?/init.lua;', fs_cwd .. '/' .. (os.getenv('QOSLAB_BUILD') or 'build') .. '/?.so;'))
    f:close()
    local p = assert(io.popen("cd '" .. dir .. "' && /usr/bin/lua5.4 relative.lua 2>&1"))
    local outp = p:read('a')
    p:close()
    assert.equal("sub/x.png sub/x.svg q'$(touch pwned)`touch pwned`/y.png", outp)
    assert_png(dir .. '/sub/x.png')
    assert_svg(dir .. '/sub/x.svg')
    assert_png(dir .. "/q'$(touch pwned)`touch pwned`/y.png")
    assert.is_nil(slurp(dir .. '/pwned'))
    assert.is_nil(slurp(dir .. "/q'$(touch pwned)`touch pwned`/pwned"))
  end)

  it('a gnuplot error is reported as EIO with gnuplot\'s message', function()
    -- Negative values on a log y axis: gnuplot stops with "all points y value undefined".
    local files, msg, code = plot.lines { out = dir .. '/bad', logy = true,
      series = { { title = 's', points = { { 1, -1 }, { 2, -2 } } } } }
    assert.is_nil(files)
    assert.equal('EIO', code)
    assert.matches('gnuplot failed', msg, 1, true)
    assert.matches('all points y value undefined', msg, 1, true)
    assert.is_string(slurp(dir .. '/bad.dat'))
  end)
end)
