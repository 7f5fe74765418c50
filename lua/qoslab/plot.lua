--- Plots of sweeps, rendered by gnuplot (Debian: gnuplot-nox) to PNG and SVG.
--
-- Every function first writes its data files (`BASE.dat`, and `BASE.csv` for
-- the sweep helpers) and the gnuplot script (`BASE.gp`), then runs gnuplot
-- once for all formats. Without gnuplot the data files are still there and the
-- call returns `nil, "gnuplot not found: apt-get install gnuplot-nox", "ENOENT"`.
-- PNG uses the pngcairo terminal when gnuplot has it (anti-aliased), else png.
--
-- `opts.out` names files in a folder that exists: no function makes one
-- (as `qoslab client --plot` makes none); a missing folder returns `nil,
-- "cannot write ...: No such file or directory (plots make no folder: make
-- DIR first, ...)", "ENOENT"` before anything is written.
-- Options are checked before that: a wrong one raises, naming it, at the
-- caller's line.
-- @module qoslab.plot
local check = require 'qoslab.check'
local report = require 'qoslab.report'

local gnuplot = require 'qoslab.plot.gnuplot'

local M = {}

--- Locate gnuplot on PATH (`qoslab.plot.gnuplot.gnuplot`).
-- @function gnuplot
-- @treturn string|nil absolute path
-- @treturn boolean whether the pngcairo terminal exists
M.gnuplot = gnuplot.gnuplot

--- Time series of one traffic test: `qoslab.plot.timeseries.timeseries`.
-- @function timeseries
-- @tparam table res a `qoslab.traffic.run` result
-- @tparam table opts `{out = "FILE.png", title =}`
-- @usage plot.timeseries(res, {out = 'out/test.png'})
M.timeseries = require('qoslab.plot.timeseries').timeseries

--- CDF of the latency probe's RTT, idle beside loaded:
-- `qoslab.plot.timeseries.latency_cdf`.
-- @function latency_cdf
-- @tparam table res_or_list a result with a probe, or a list of them
-- @tparam table opts `{out = "FILE.png", title =, labels =}`
-- @usage plot.latency_cdf(res, {out = 'out/test-cdf.png'})
M.latency_cdf = require('qoslab.plot.timeseries').latency_cdf

--- The time series and, when a probe ran, the latency CDF of one test:
-- `qoslab.plot.timeseries.test_plots`.
-- @function test_plots
-- @tparam table res a `qoslab.traffic.run` result
-- @tparam table opts `{out = "FILE.png"}` (the CDF: "FILE-cdf.png")
-- @usage plot.test_plots(res, {out = 'out/test.png'})
M.test_plots = require('qoslab.plot.timeseries').test_plots
local gq, num, render, base_of = gnuplot.gq, gnuplot.num, gnuplot.render, gnuplot.base_of
local check_formats, write_file = gnuplot.check_formats, gnuplot.write_file

local PALETTE = "set palette defined (0 '#ffffd9', 1 '#c7e9b4', 2 '#7fcdbb', 3 '#41b6c4', "
  .. "4 '#1d91c0', 5 '#225ea8')"

-- 1-2-5 tics between lo and hi (for log colour and z axes).
local function tics125(lo, hi)
  local out = {}
  if not lo or not hi or lo <= 0 then return out end
  local e = math.floor(math.log(lo, 10)) - 1
  while 10 ^ e <= hi * 10 do
    for _, m in ipairs { 1, 2, 5 } do
      local v = m * 10 ^ e
      if v >= lo * 0.999 and v <= hi * 1.001 then out[#out + 1] = v end
    end
    e = e + 1
  end
  return out
end

-- An optional number (nil: a gap in the line). level as in check.fail.
local function opt_number(ctx, field, v, level)
  if v ~= nil and type(v) ~= 'number' then check.fail(ctx, field, 'a number', v, level + 1) end
end

-- lines' series (sweep_lines' extra_series): tables with `points` {{x, y[,
-- err]}, ...} (x or y nil: a gap), optional `boxes` {{x, min, q1, median,
-- q3, max}, ...} and `values` {{x, v}, ...}. level as in check.fail.
local function check_series(ctx, field, list, level)
  local L = level + 1
  check.table(ctx, field, list, L)
  for i, s in ipairs(list) do
    local f = field .. '[' .. i .. ']'
    check.table(ctx, f, s, L)
    check.table(ctx, f .. '.points', s.points, L)
    for j, p in ipairs(s.points) do
      local pf = f .. '.points[' .. j .. ']'
      check.table(ctx, pf, p, L)
      for k = 1, 3 do opt_number(ctx, pf .. '[' .. k .. ']', p[k], L) end
    end
    for _, part in ipairs { { 'boxes', 6 }, { 'values', 2 } } do
      local list2 = s[part[1]]
      if list2 ~= nil then
        check.table(ctx, f .. '.' .. part[1], list2, L)
        for j, b in ipairs(list2) do
          local bf = f .. '.' .. part[1] .. '[' .. j .. ']'
          check.table(ctx, bf, b, L)
          for k = 1, part[2] do
            if type(b[k]) ~= 'number' then check.fail(ctx, bf .. '[' .. k .. ']', 'a number', b[k], L) end
          end
        end
      end
    end
  end
end

-- opts.hlines: {{y = number, title = string|nil}, ...}. level as in check.fail.
local function check_hlines(ctx, hlines, level)
  local L = level + 1
  if hlines == nil then return end
  check.table(ctx, 'opts.hlines', hlines, L)
  for i, h in ipairs(hlines) do
    local f = 'opts.hlines[' .. i .. ']'
    check.table(ctx, f, h, L)
    if type(h.y) ~= 'number' then check.fail(ctx, f .. '.y', 'a number', h.y, L) end
    check.string(ctx, f .. '.title', h.title, nil, L)
  end
end

local function tics_cmd(axis, values)
  if #values == 0 then return '' end
  local t = {}
  for i, v in ipairs(values) do t[i] = string.format("'%g' %.10g", v, v) end
  return 'set ' .. axis .. 'tics (' .. table.concat(t, ', ') .. ')'
end

--- Line plot: one series per value of something (window size, client count).
-- @tparam table opts
--   * `out` (string): path without extension; writes out.dat, out.gp, out.png, out.svg
--   * `title`, `xlabel`, `ylabel` (strings; put units in the labels)
--   * `series` ({{title = string, points = {{x, y[, err]}, ...}}, ...}): err is
--     drawn as an error bar (95 % CI); a series may also carry
--     `reference = true` (drawn as a dashed line without points: a bound,
--     not a measurement), `boxes = {{x, min, q1, median, q3, max}, ...}`
--     (a box plot per x: box from q1 to q3, the median across it, whiskers
--     to min and max; the boxes of several series sit side by side) and
--     `values = {{x, v}, ...}` (every measurement, as small circles)
--   * `logx` (bool, default true), `logy` (bool, default false)
--   * `hlines` ({{y = number, title = string}, ...}): reference lines (link rate)
--   * `formats` (default {"png", "svg"}), `size` ({w, h} pixels, default {900, 600})
--   * `xtic_label` (function(x) -> string): tics at the data's x values
--   * `failed` ({x, ...}): x values measured without a result (a failed
--     point), each marked by a dashed red line across the plot; they count
--     in the x range and tics
-- @treturn table files `{dat, gp, png, svg}`
-- @return or nil, message, "ENOENT" (no gnuplot: dat/gp written; or out's
--   folder does not exist: nothing written) | "EIO" | "EINVAL" (nothing to plot)
-- @raise on bad options, naming the field, at the caller's line
-- @usage plot.lines{out = 'out/delay', title = 'TCP vs delay', xlabel = 'delay (ms)',
--   ylabel = 'throughput (Mbit/s)', series = {{title = '1 stream', points = {{1, 850}}}}}
function M.lines(opts)
  local ctx = 'qoslab.plot.lines'
  check.table(ctx, 'opts', opts)
  check.keys(ctx, 'opts', opts, { out = true, title = true, xlabel = true, ylabel = true,
    series = true, logx = true, logy = true, hlines = true, formats = true, size = true,
    xtic_label = true, failed = true }, 2)
  local base = base_of(ctx, opts)
  check.func(ctx, 'opts.xtic_label', opts.xtic_label)
  local xvals, xseen = {}, {}
  local formats = check_formats(ctx, opts.formats)
  check_series(ctx, 'opts.series', opts.series, 1)
  check_hlines(ctx, opts.hlines, 1)
  local size = gnuplot.check_size(ctx, opts.size, { 900, 600 })
  local logx = check.boolean(ctx, 'opts.logx', opts.logx, true)
  local logy = check.boolean(ctx, 'opts.logy', opts.logy, false)
  if opts.failed ~= nil then
    check.table(ctx, 'opts.failed', opts.failed)
    for i, x in ipairs(opts.failed) do check.number(ctx, 'opts.failed[' .. i .. ']', x) end
  end
  local dat = {}
  local plots = {}
  local idx = 0
  local maxy = 0
  local nbox, boxed = 0, {}
  for i, s in ipairs(opts.series) do
    if s.boxes ~= nil and #s.boxes > 0 then nbox = nbox + 1 boxed[i] = nbox end
  end
  -- Box geometry: a half width and a shift per boxed series, as a factor on
  -- a log x axis, in x units on a linear one (from the closest two x values).
  local gap
  do
    local xs = {}
    for _, s in ipairs(opts.series) do for _, p in ipairs(s.points) do xs[#xs + 1] = p[1] end end
    table.sort(xs)
    for k = 2, #xs do
      local d = xs[k] - xs[k - 1]
      if d > 0 and (gap == nil or d < gap) then gap = d end
    end
    gap = gap or 1
  end
  local function box_x(x, k)
    local off = k - (nbox + 1) / 2
    if logx then
      local f = math.min(1.12, 1 + 0.25 / nbox)
      local c = x * (f ^ (2.2 * off))
      return c, c / f ^ 0.9, c * f ^ 0.9
    end
    local w = math.min(0.12, 0.3 / nbox) * gap
    local c = x + 2.2 * w * off
    return c, c - 0.9 * w, c + 0.9 * w
  end
  for i, s in ipairs(opts.series) do
    if #s.points > 0 then
      dat[#dat + 1] = '# ' .. tostring(s.title or ('series ' .. i)):gsub('\n', ' ')
      dat[#dat + 1] = '# x y err'
      local has_err = false
      for _, p in ipairs(s.points) do
        dat[#dat + 1] = num(p[1]) .. ' ' .. num(p[2]) .. ' ' .. num(p[3] or 0)
        if p[2] and p[2] + (p[3] or 0) > maxy then maxy = p[2] + (p[3] or 0) end
        if p[1] and not xseen[p[1]] then xseen[p[1]] = true xvals[#xvals + 1] = p[1] end
        if p[3] then has_err = true end
      end
      dat[#dat + 1] = ''
      dat[#dat + 1] = ''
      local t = gq(s.title or ('series ' .. i))
      if s.reference then
        plots[#plots + 1] = string.format('datafile index %d using 1:2 with lines dt 2 lw 2 lc %d title %s', idx, i, t)
      else
        plots[#plots + 1] = string.format(
          'datafile index %d using 1:2 with linespoints lw 2 pt 7 ps 1.1 lc %d title %s', idx, i, t)
      end
      if has_err and not boxed[i] then
        plots[#plots + 1] = string.format("datafile index %d using 1:2:3 with yerrorbars lc %d pt 7 ps 0 notitle",
          idx, i)
      end
      idx = idx + 1
      if boxed[i] then
        dat[#dat + 1] = '# ' .. tostring(s.title or ('series ' .. i)):gsub('\n', ' ') .. ': boxes'
        dat[#dat + 1] = '# x box_x box_left box_right min q1 median q3 max'
        for _, b in ipairs(s.boxes) do
          local c, l, r = box_x(b[1], boxed[i])
          dat[#dat + 1] = table.concat({ num(b[1]), num(c), num(l), num(r), num(b[2]), num(b[3]), num(b[4]),
            num(b[5]), num(b[6]) }, ' ')
          if b[6] > maxy then maxy = b[6] end
        end
        dat[#dat + 1] = ''
        dat[#dat + 1] = ''
        plots[#plots + 1] = string.format('datafile index %d using 2:(($6+$8)/2):3:4:6:8 with boxxyerror '
          .. 'fs solid 0.25 border lt %d lc %d lw 1.5 notitle', idx, i, i)
        plots[#plots + 1] = string.format(
          'datafile index %d using 3:7:($4-$3):(0) with vectors nohead lw 3 lc %d notitle', idx, i)
        plots[#plots + 1] = string.format(
          'datafile index %d using 2:5:(0):($6-$5) with vectors nohead lw 1.5 lc %d notitle', idx, i)
        plots[#plots + 1] = string.format(
          'datafile index %d using 2:8:(0):($9-$8) with vectors nohead lw 1.5 lc %d notitle', idx, i)
        idx = idx + 1
      end
      if s.values and #s.values > 0 then
        dat[#dat + 1] = '# ' .. tostring(s.title or ('series ' .. i)):gsub('\n', ' ') .. ': every measurement'
        dat[#dat + 1] = '# x value (x shifted beside its box)'
        for _, v in ipairs(s.values) do
          local c = boxed[i] and box_x(v[1], boxed[i]) or v[1]
          dat[#dat + 1] = num(c) .. ' ' .. num(v[2])
          if v[2] > maxy then maxy = v[2] end
        end
        dat[#dat + 1] = ''
        dat[#dat + 1] = ''
        plots[#plots + 1] = string.format('datafile index %d using 1:2 with points pt 6 ps 0.7 lc %d notitle', idx, i)
        idx = idx + 1
      end
    end
  end
  local failed_labels = {}
  if opts.failed ~= nil then
    for _, x in ipairs(opts.failed) do
      if not xseen[x] then xseen[x] = true xvals[#xvals + 1] = x end
      -- a line across the plot, not a point: a point would read as a value
      failed_labels[#failed_labels + 1] = string.format("set arrow from first %s, graph 0 to first %s, graph 1 "
        .. "nohead dt 2 lw 2 lc rgb '#cc0000' front\nset label 'failed' at first %s, graph 0.97 left "
        .. "textcolor rgb '#cc0000' front offset 0.6,-0.2", num(x), num(x), num(x))
    end
    if #opts.failed > 0 then
      plots[#plots + 1] = "keyentry with lines dt 2 lw 2 lc rgb '#cc0000' title 'failed: no result at this x'"
    end
  end
  if nbox > 0 then
    plots[#plots + 1] = "keyentry with boxxyerror fs solid 0.25 border lc rgb '#444444' lc rgb '#999999' "
      .. "title 'box: middle half of the repetitions, bar: median, whiskers: min and max, circles: each run'"
  end
  for _, h in ipairs(opts.hlines or {}) do
    if h.y > maxy then maxy = h.y end
    plots[#plots + 1] = string.format("%s with lines dt 2 lw 2 lc rgb '#777777' title %s",
      num(h.y), gq(h.title or ''))
  end
  local datfile = base .. '.dat'
  local ok, err, wcode = write_file(datfile, table.concat(dat, '\n') .. '\n')
  if not ok then return nil, err, wcode end
  -- A function, not a string: "%" in the path is not a capture reference.
  local datq = gq(datfile)
  for i, p in ipairs(plots) do plots[i] = p:gsub('^datafile', function() return datq end) end
  local prelude = table.concat({
    'set datafile missing NaN',
    'set title ' .. gq(opts.title or '') .. " font ',14'",
    'set xlabel ' .. gq(opts.xlabel or ''),
    'set ylabel ' .. gq(opts.ylabel or ''),
    logx and 'set logscale x' or '',
    logy and 'set logscale y' or '',
    "set grid xtics ytics lt 1 lw 1 lc rgb '#d8d8d8'",
    -- samples left of their text: a long entry's sample stays off the edge
    'set key below center reverse Left samplen 3',
    "set format x '%g'",
    "set format y '%g'",
    maxy <= 0 and '' or logy and string.format('set yrange [*:%.10g]', maxy * 1.6)
      or string.format('set yrange [0:%.10g]', maxy * 1.08),
    'set bars small',
    table.concat(failed_labels, '\n'),
  }, '\n')
  if #plots == 0 then return nil, ctx .. ': nothing to plot', 'EINVAL' end
  table.sort(xvals)
  if #xvals > 0 then
    local lo, hi = xvals[1], xvals[#xvals]
    -- room for the boxes beside the outermost points
    local m = nbox > 0 and 1.6 or 1.25
    if logx and lo > 0 then
      prelude = prelude .. string.format('\nset xrange [%.10g:%.10g]', lo / m, hi * m)
    elseif hi > lo then
      local pad = 0.03 * (hi - lo) + (nbox > 0 and 0.4 * gap or 0)
      prelude = prelude .. string.format('\nset xrange [%.10g:%.10g]', lo - pad, hi + pad)
    end
  end
  if opts.xtic_label then
    local t = {}
    for i, x in ipairs(xvals) do t[i] = gq(opts.xtic_label(x)) .. ' ' .. num(x) end
    prelude = prelude .. '\nset xtics (' .. table.concat(t, ', ') .. ')'
  end
  local files, e2, code = render(base, prelude, 'plot ' .. table.concat(plots, ', \\\n  '),
    formats, size)
  if not files then return nil, e2, code end
  files.dat = datfile
  return files
end

-- heatmap's and surface's options past out and formats. level as in
-- check.fail.
local function grid_check(ctx, opts, level)
  local L = level + 1
  for _, k in ipairs { 'xs', 'ys' } do
    check.table(ctx, 'opts.' .. k, opts[k], L)
    for i, v in ipairs(opts[k]) do check.number(ctx, 'opts.' .. k .. '[' .. i .. ']', v, nil, nil, nil, L) end
  end
  if #opts.xs < 2 or #opts.ys < 1 then
    check.fail(ctx, 'opts.xs', 'at least 2 x values and 1 y value', #opts.xs, L)
  end
  check.table(ctx, 'opts.z', opts.z, L)
  for j = 1, #opts.ys do
    local row = opts.z[j]
    if row ~= nil then
      check.table(ctx, 'opts.z[' .. j .. ']', row, L)
      for i = 1, #opts.xs do opt_number(ctx, 'opts.z[' .. j .. '][' .. i .. ']', row[i], L) end
    end
  end
  if opts.contours ~= nil then
    check.table(ctx, 'opts.contours', opts.contours, L)
    for i, v in ipairs(opts.contours) do
      check.number(ctx, 'opts.contours[' .. i .. ']', v, nil, nil, nil, L)
    end
  end
  check.string(ctx, 'opts.contour_unit', opts.contour_unit, nil, L)
  check.boolean(ctx, 'opts.logz', opts.logz, nil, L)
  local size = gnuplot.check_size(ctx, opts.size, nil, L)
  return size
end

-- Cells the stop rule skipped are nil in z. The surface leaves them out
-- (NaN, missing to gnuplot) and marks them. The heat map's contour lines are
-- traced on a grid where a skipped cell takes the last measured value to its
-- left in the row (throughput falls with delay, so an upper bound), which
-- keeps them continuous between measured cells, and are then clipped: no
-- part of a line is drawn inside a skipped (grey) cell.
local function filled(opts)
  local out = {}
  for j = 1, #opts.ys do
    local last
    out[j] = {}
    for i = 1, #opts.xs do
      local v = opts.z[j] and opts.z[j][i]
      if v ~= nil then last = v end
      out[j][i] = v or last
    end
  end
  return out
end
local function zrange(opts)
  local lo, hi
  for j = 1, #opts.ys do
    for i = 1, #opts.xs do
      local v = opts.z[j] and opts.z[j][i]
      if v and v > 0 then
        lo = (lo == nil or v < lo) and v or lo
        hi = (hi == nil or v > hi) and v or hi
      end
    end
  end
  return lo, hi
end

-- Levels outside [lo, hi] draw no line; say so on the plot instead of
-- leaving the reader to wonder where the contour went.
local function contour_notes(levels, lo, hi, unit)
  local notes = {}
  for _, l in ipairs(levels or {}) do
    if lo and l < lo then
      notes[#notes + 1] = string.format('%g %s: every measured value is above', l, unit or '')
    elseif hi and l > hi then
      notes[#notes + 1] = string.format('%g %s: every measured value is below', l, unit or '')
    end
  end
  if #notes == 0 then return '' end
  return 'set bmargin 5\nset label ' .. gq('no contour line at ' .. table.concat(notes, '; '))
    .. " at screen 0.01, screen 0.025 left font ',9'"
end

local function crossed(l, lo, hi) return lo ~= nil and l >= lo and l <= hi end

local CONTOUR_COLOURS = { "'#d62728'", "'#000000'", "'#9467bd'", "'#ff7f0e'" }

local GRID_KEYS = { out = true, title = true, xlabel = true, ylabel = true, zlabel = true,
  xs = true, ys = true, z = true, contours = true, contour_unit = true, logz = true,
  formats = true, size = true, digits = true }

--- Heat map of z(x, y) as a table of coloured cells with the values written in,
-- and contour lines at chosen levels (interpolated between cell centres).
-- @tparam table opts
--   * `out` (path without extension), `title`, `xlabel`, `ylabel`, `zlabel`
--   * `xs`, `ys` (lists of numbers: column and row values, e.g. delays, losses)
--   * `z` (z[j][i] for ys[j], xs[i]; nil = not measured, drawn grey "stop")
--   * `contours` (list of z levels, in z's unit, e.g. {0.5, 1} Mbit/s),
--     `contour_unit` (string for the key, e.g. "Mbit/s")
--   * `logz` (bool, default: true when max/min > 50), `digits` (default 3)
--   * `formats`, `size` as in `lines`
-- @treturn table files `{dat, gp, png, svg}` or nil, message, CODE as in `lines`
-- @raise on bad options, naming the field, at the caller's line
function M.heatmap(opts)
  local ctx = 'qoslab.plot.heatmap'
  check.table(ctx, 'opts', opts)
  check.keys(ctx, 'opts', opts, GRID_KEYS, 2)
  local base = base_of(ctx, opts)
  local formats = check_formats(ctx, opts.formats)
  grid_check(ctx, opts, 1)
  local digits = check.integer(ctx, 'opts.digits', opts.digits, 1, 10, 3)
  local fill = filled(opts)
  local cells, stops, grid, inside = {}, {}, {}, {}
  cells[1] = '# i j z label  (i, j: column and row index; z NaN = skipped)'
  for j, y in ipairs(opts.ys) do
    for i = 1, #opts.xs do
      local v = opts.z[j] and opts.z[j][i]
      if v == nil then
        stops[#stops + 1] = string.format('%d %d', i - 1, j - 1)
        inside[#inside + 1] = string.format('(abs(x-%d)<=0.5 && abs(y-%d)<=0.5)', i - 1, j - 1)
        cells[#cells + 1] = string.format('%d %d NaN "stop"', i - 1, j - 1)
      else
        cells[#cells + 1] = string.format('%d %d %s "%.' .. digits .. 'g"', i - 1, j - 1, num(v), v)
      end
      grid[#grid + 1] = string.format('%d %d %s', i - 1, j - 1, num(fill[j][i]))
    end
    grid[#grid + 1] = ''
    local _ = y
  end
  local datfile, gridfile, stopfile = base .. '.dat', base .. '.grid.dat', base .. '.stop.dat'
  for _, w in ipairs { { datfile, cells }, { gridfile, grid }, { stopfile, stops } } do
    local ok, err, wcode = write_file(w[1], table.concat(w[2], '\n') .. '\n')
    if not ok then return nil, err, wcode end
  end
  local lo, hi = zrange(opts)
  local logz = opts.logz
  if logz == nil then logz = lo ~= nil and hi / lo > 50 end
  local xt, yt = {}, {}
  for i, x in ipairs(opts.xs) do xt[i] = string.format("'%g' %d", x, i - 1) end
  for j, y in ipairs(opts.ys) do yt[j] = string.format("'%g' %d", y, j - 1) end
  local pre = {
    'set datafile missing NaN',
    'set title ' .. gq(opts.title or '') .. " font ',14'",
    'set xlabel ' .. gq(opts.xlabel or ''),
    'set ylabel ' .. gq(opts.ylabel or ''),
    'set cblabel ' .. gq(opts.zlabel or ''),
    'set xtics (' .. table.concat(xt, ', ') .. ')',
    'set ytics (' .. table.concat(yt, ', ') .. ')',
    string.format('set xrange [-0.5:%g]', #opts.xs - 0.5),
    string.format('set yrange [-0.5:%g]', #opts.ys - 0.5),
    PALETTE,
    'set style fill solid 1.0 noborder',
    'set key outside top center horizontal',
  }
  if logz and lo then
    pre[#pre + 1] = 'set logscale cb'
    pre[#pre + 1] = string.format('set cbrange [%.10g:%.10g]', lo, hi)
    pre[#pre + 1] = tics_cmd('cb', tics125(lo, hi))
  end
  -- Contour lines: one table per level so each gets its own colour and title.
  local plots = {
    string.format("%s using 1:2:(0.5):(0.5):3 with boxxyerror fc palette notitle", gq(datfile)),
  }
  if #stops > 0 then
    plots[#plots + 1] = string.format("%s using 1:2:(0.5):(0.5) with boxxyerror fc rgb '#d9d9d9' notitle",
      gq(stopfile))
  end
  pre[#pre + 1] = contour_notes(opts.contours, lo, hi, opts.contour_unit)
  if #stops > 0 then
    pre[#pre + 1] = 'set title ' .. gq((opts.title or '') .. '\n(grey: skipped by the stop rule)') .. " font ',14'"
    -- Contour points inside a skipped cell become undefined: the line breaks there.
    pre[#pre + 1] = 'skipped(x, y) = ' .. table.concat(inside, ' || ')
  else
    pre[#pre + 1] = 'skipped(x, y) = 0'
  end
  for k, level in ipairs(opts.contours or {}) do
    local cf = string.format('%s.contour%d.dat', base, k)
    if not crossed(level, lo, hi) then goto next_level end
    pre[#pre + 1] = table.concat({
      'set table ' .. gq(cf), 'unset surface', 'set contour base', 'set cntrparam linear',
      string.format('set cntrparam levels discrete %.10g', level),
      string.format('splot %s using 1:2:3 with lines notitle', gq(gridfile)),
      'unset table', 'unset contour', 'set surface',
    }, '\n')
    plots[#plots + 1] = string.format("%s using 1:(skipped($1, $2) ? NaN : $2) with lines lw 3 lc rgb %s title %s",
      gq(cf), CONTOUR_COLOURS[(k - 1) % #CONTOUR_COLOURS + 1],
      gq(string.format('%g %s', level, opts.contour_unit or '')))
    ::next_level::
  end
  -- The cell labels come last, each on a pale box: a contour line passes
  -- under a label, never across its digits.
  pre[#pre + 1] = "set style textbox opaque fc rgb '#ffffff' noborder margins 3,2"
  plots[#plots + 1] = string.format('%s using 1:2:4 with labels boxed notitle', gq(datfile))
  local files, err, code = render(base, table.concat(pre, '\n'),
    'plot ' .. table.concat(plots, ', \\\n  '), formats, opts.size or { 900, 650 })
  if not files then return nil, err, code end
  files.dat = datfile
  return files
end

--- 3-D surface of z(x, y) over real x/y coordinates (log x), with contour lines
-- on the surface and on the base at chosen levels.
-- @tparam table opts as `heatmap` (skipped cells are left out of the surface
--   and its contours, and marked with a grey cross on the base plane)
-- @treturn table files or nil, message, CODE as in `lines`
-- @raise on bad options, naming the field, at the caller's line
function M.surface(opts)
  local ctx = 'qoslab.plot.surface'
  check.table(ctx, 'opts', opts)
  check.keys(ctx, 'opts', opts, GRID_KEYS, 2)
  local base = base_of(ctx, opts)
  local formats = check_formats(ctx, opts.formats)
  grid_check(ctx, opts, 1)
  local rows = { '# x y z  (one block per y; NaN = skipped by the stop rule)' }
  local stops = { '# x y  (skipped by the stop rule)' }
  for j, y in ipairs(opts.ys) do
    for i, x in ipairs(opts.xs) do
      local v = opts.z[j] and opts.z[j][i]
      rows[#rows + 1] = num(x) .. ' ' .. num(y) .. ' ' .. num(v)
      if v == nil then stops[#stops + 1] = num(x) .. ' ' .. num(y) end
    end
    rows[#rows + 1] = ''
  end
  local datfile, stopfile = base .. '.dat', base .. '.stop.dat'
  for _, w in ipairs { { datfile, rows }, { stopfile, stops } } do
    local ok, err, wcode = write_file(w[1], table.concat(w[2], '\n') .. '\n')
    if not ok then return nil, err, wcode end
  end
  local lo, hi = zrange(opts)
  local logz = opts.logz
  if logz == nil then logz = lo ~= nil and hi / lo > 50 end
  local levels = {}
  for i, l in ipairs(opts.contours or {}) do levels[i] = string.format('%.10g', l) end
  local pre = {
    'set datafile missing NaN',
    'set title ' .. gq(opts.title or '') .. " font ',14'",
    'set xlabel ' .. gq(opts.xlabel or '') .. ' offset 0,-1',
    'set ylabel ' .. gq(opts.ylabel or '') .. ' offset 0,-1',
    'set zlabel ' .. gq(opts.zlabel or '') .. ' rotate parallel',
    string.format('set xrange [%.10g:%.10g]', opts.xs[1], opts.xs[#opts.xs]),
    string.format('set yrange [%.10g:%.10g]', opts.ys[1] - (#opts.ys == 1 and 1 or 0),
      opts.ys[#opts.ys] + (#opts.ys == 1 and 1 or 0)),
    'set logscale x', "set format x '%g'", "set format z '%g'",
    'set ticslevel 0', 'set view 60, 30', "set ytics offset 1.5,-0.5", 'set pm3d at s', PALETTE, 'unset colorbox',
    "set grid xtics ytics ztics lc rgb '#dddddd'",
    -- below the title's lines, right: clear of a two-line title and of the surface
    'set key at screen 0.99, screen 0.86 right top',
  }
  if logz and lo then
    pre[#pre + 1] = 'set logscale z'
    pre[#pre + 1] = 'set logscale cb'
    pre[#pre + 1] = tics_cmd('z', tics125(lo, hi))
  end
  -- Contours are computed into tables first (one per level), then drawn thick
  -- on the surface and on the base plane, each level in its own colour.
  local zbase = (logz and lo) or 0
  if not (logz and lo) then pre[#pre + 1] = 'set zrange [0:*]' end
  local plots = { string.format("%s using 1:2:3 with lines lc rgb '#666666' lw 0.5 title 'measured surface'",
    gq(datfile)) }
  if #stops > 1 then
    plots[#plots + 1] = string.format(
      "%s using 1:2:(%.10g) with points pt 2 ps 1.5 lw 2 lc rgb '#808080' title 'skipped (stop rule)'",
      gq(stopfile), zbase)
  end
  pre[#pre + 1] = contour_notes(opts.contours, lo, hi, opts.contour_unit)
  for k, level in ipairs(opts.contours or {}) do
    if not crossed(level, lo, hi) then goto next_level end
    local cf = string.format('%s.contour%d.dat', base, k)
    pre[#pre + 1] = table.concat({
      'set table ' .. gq(cf), 'unset surface', 'set contour base', 'set cntrparam linear',
      'set cntrparam levels discrete ' .. levels[k],
      string.format('splot %s using 1:2:3 with lines notitle', gq(datfile)),
      'unset table', 'unset contour', 'set surface',
    }, '\n')
    local colour = CONTOUR_COLOURS[(k - 1) % #CONTOUR_COLOURS + 1]
    plots[#plots + 1] = string.format("%s using 1:2:(%s) with lines lw 3 lc rgb %s title %s",
      gq(cf), levels[k], colour, gq(string.format('%g %s', level, opts.contour_unit or '')))
    plots[#plots + 1] = string.format("%s using 1:2:(%.10g) with lines lw 2 dt 2 lc rgb %s notitle",
      gq(cf), zbase, colour)
    ::next_level::
  end
  local xt = {}
  for i, x in ipairs(opts.xs) do xt[i] = string.format("'%g' %.10g", x, x) end
  pre[#pre + 1] = 'set xtics (' .. table.concat(xt, ', ') .. ')'
  local yt = {}
  for j, y in ipairs(opts.ys) do yt[j] = string.format("'%g' %.10g", y, y) end
  pre[#pre + 1] = 'set ytics (' .. table.concat(yt, ', ') .. ') offset 1.5,-0.5'
  local body = 'splot ' .. table.concat(plots, ', \\\n  ')
  local files, e2, code = render(base, table.concat(pre, '\n'), body, formats,
    opts.size or { 900, 700 })
  if not files then return nil, e2, code end
  files.dat = datfile
  return files
end

--- A byte count as a short label with binary units: 262144 -> "256 KiB".
-- @tparam number b bytes
-- @treturn string
-- @raise when b is not a number
function M.bytes_label(b)
  if type(b) ~= 'number' then check.fail('qoslab.plot.bytes_label', 'b', 'a number of bytes', b) end
  if b >= 1073741824 then return string.format('%g GiB', b / 1073741824) end
  if b >= 1048576 then return string.format('%g MiB', b / 1048576) end
  if b >= 1024 then return string.format('%g KiB', b / 1024) end
  return string.format('%g B', b)
end

--- An axis label for a sweep parameter, its unit from its name's suffix:
-- "window_bytes" -> "window (bytes)", "delay_ms" -> "delay (ms)",
-- "loss_pct" -> "loss (%)", "rate_bps" -> "rate (bit/s)".
-- @tparam string name the parameter
-- @treturn string
-- @raise when name is not a string
function M.param_label(name)
  check.string('qoslab.plot.param_label', 'name', name)
  return (name:gsub('_pct$', ' (%%)'):gsub('_ms$', ' (ms)'):gsub('_bytes$', ' (bytes)')
    :gsub('_bps$', ' (bit/s)'):gsub('_s$', ' (s)'):gsub('_', ' '))
end

--- The tic labels of a sweep parameter's axis, put at its measured values:
-- sizes (`_bytes`) in binary units ("64 KiB"), integers as themselves
-- (up to 40 values); other values keep gnuplot's own tics.
-- @tparam string name the parameter
-- @tparam {number,...} xs the values it takes
-- @treturn function|nil `function(x) -> string` for `lines`' `xtic_label`, or nil
-- @raise when name is not a string or xs not a list of numbers
function M.param_tic_label(name, xs)
  local ctx = 'qoslab.plot.param_tic_label'
  if type(name) ~= 'string' then check.fail(ctx, 'name', 'a string', name) end
  check.table(ctx, 'xs', xs)
  for i, v in ipairs(xs) do if type(v) ~= 'number' then check.fail(ctx, 'xs[' .. i .. ']', 'a number', v) end end
  if name:match('_bytes$') then return M.bytes_label end
  local integers = #xs > 0 and #xs <= 40
  for _, v in ipairs(xs) do integers = integers and v == math.floor(v) end
  if integers then return function(v) return string.format('%d', v) end end
  return nil
end

--- From sweep summaries.
-- @section from_sweep_summaries

local function stats_of(p)
  if p.summary and p.mean == nil then
    return { mean = p.summary.mean, ci95 = p.summary.ci95, params = p.params,
             skipped = p.skipped, error = p.error, values = p.summary.values, results = p.results }
  end
  return p
end


-- The q-quantile of sorted v by linear interpolation between closest ranks
-- (R's type 7, numpy's default): with 3 repetitions q1 is halfway between
-- the smallest two.
local function quantile(v, q)
  local h = (#v - 1) * q + 1
  local lo = math.floor(h)
  if lo >= #v then return v[#v] end
  return v[lo] + (h - lo) * (v[lo + 1] - v[lo])
end

local function box_of(x, values, scale)
  local v = {}
  for i, y in ipairs(values) do v[i] = y / scale end
  table.sort(v)
  return { x, v[1], quantile(v, 0.25), quantile(v, 0.5), quantile(v, 0.75), v[#v] }
end

-- The first traffic result of a sweep's points (kept results only).
local function first_result(points)
  for _, p in ipairs(points) do
    local r = p.results and p.results[1]
    if type(r) == 'table' then return r end
  end
end

-- measured_where's work on a checked summary and its points.
local function measured_where(summary, pts)
  local first = pts[1] or {}
  local metric = summary.metric or first.metric
  local where = summary.where or first.where
  local backend = summary.backend or first.backend
  local r = first_result(pts)
  local parts = {}
  local what
  if metric == 'received.bits_per_second' or (metric == nil and r) then what = 'received throughput'
  elseif metric == 'sent.bits_per_second' then what = 'sent throughput'
  elseif metric then what = tostring(metric) end
  if what and r and r.proto then what = what:gsub('throughput', string.upper(tostring(r.proto)) .. ' throughput') end
  if what then parts[#parts + 1] = what end
  if r then
    local netns = r.options and r.options.netns
    local to = r.host and (' → ' .. tostring(r.host)) or ''
    parts[#parts + 1] = (netns and ('client netns ' .. tostring(netns)) or 'client on the host') .. to
  end
  if where or backend then
    parts[#parts + 1] = (where and tostring(where) or '')
      .. ((where and backend) and ', ' or '') .. (backend and tostring(backend) or '')
  end
  if #parts == 0 then return nil end
  return table.concat(parts, ' · ')
end

--- What a sweep measured, where and with which backend, for a plot's title:
-- "received TCP throughput · client netns qlc-1 → 10.9.0.2 · host, link"
-- (where: "host" this machine's kernel, "guest" the qemu guest; backend:
-- "netem" kernel netem, "link" qoslab's native impairment link).
-- From the summary (`metric`, `where`, `backend`) or records (the same), and
-- the first kept traffic result (`proto`, `host`, `options.netns`).
-- @tparam table summary from plan.sweep, or records from plan.load
-- @treturn string|nil nil when nothing is known
-- @raise when summary is not one, naming the field
-- @usage plot.sweep_lines(s, {..., subtitle = plot.measured_where(s)})
function M.measured_where(summary)
  local pts = report._points_of('qoslab.plot.measured_where', 'summary', summary, 1)
  return measured_where(summary, pts)
end

-- The title with the subtitle on a second line (opts.subtitle: a string,
-- false for none, nil for `measured_where`).
local function titled(title, summary, pts, subtitle)
  if subtitle == false then return title end
  if subtitle == nil then subtitle = measured_where(summary, pts) end
  if not subtitle or subtitle == '' then return title end
  if not title or title == '' then return subtitle end
  return title .. '\n' .. subtitle
end

-- opts.subtitle: a string, or false for none. level as in check.fail.
local function check_subtitle(ctx, v, level)
  if v ~= nil and v ~= false and type(v) ~= 'string' then
    check.fail(ctx, 'opts.subtitle', 'a string or false', v, level + 1)
  end
end

local function sorted_distinct(points, name)
  local seen, out = {}, {}
  for _, p in ipairs(points) do
    local v = p.params[name]
    if v ~= nil and not seen[v] then seen[v] = true out[#out + 1] = v end
  end
  table.sort(out)
  return out
end

local SWEEP_LINES_KEYS = { out = true, x = true, series = true, series_title = true,
  title = true, xlabel = true, ylabel = true, scale = true, logx = true, logy = true,
  where = true, hlines = true, formats = true, size = true, xtic_label = true,
  extra_series = true, boxes = true, subtitle = true }

-- sweep_lines' work (and sweep_box's), its errors named ctx. Every option
-- is checked here, under ctx, before lines is called: an option naming
-- what the sweep does not have (opts.x, opts.series, a key of opts.where)
-- raises listing the parameters it has. level as in check.fail.
local function sweep_lines(ctx, summary, opts, level)
  local L = level + 1
  local points = report._points_of(ctx, 'summary', summary, L)
  check.table(ctx, 'opts', opts, L)
  check.keys(ctx, 'opts', opts, SWEEP_LINES_KEYS, L + 1)
  base_of(ctx, opts, L)
  local x = report._check_param(ctx, 'opts.x', points, check.string(ctx, 'opts.x', opts.x, 'delay_ms', L),
    true, L)
  if opts.series ~= nil then report._check_param(ctx, 'opts.series', points, opts.series, false, L) end
  local where = report._check_where(ctx, 'opts.where', points, opts.where, L)
  local scale = check.positive(ctx, 'opts.scale', opts.scale, 1e6, L)
  for _, k in ipairs { 'title', 'xlabel', 'ylabel' } do check.string(ctx, 'opts.' .. k, opts[k], nil, L) end
  for _, k in ipairs { 'logx', 'logy', 'boxes' } do check.boolean(ctx, 'opts.' .. k, opts[k], nil, L) end
  for _, k in ipairs { 'series_title', 'xtic_label' } do check.func(ctx, 'opts.' .. k, opts[k], nil, L) end
  check_subtitle(ctx, opts.subtitle, L)
  check_formats(ctx, opts.formats, L)
  gnuplot.check_size(ctx, opts.size, nil, L)
  check_hlines(ctx, opts.hlines, L)
  if opts.extra_series ~= nil then check_series(ctx, 'opts.extra_series', opts.extra_series, L) end
  local boxes = opts.boxes
  if boxes == nil then
    boxes = false
    for _, p0 in ipairs(points) do
      local p = stats_of(p0)
      if p.values and #p.values > 1 and not p.skipped then boxes = true end
    end
  end
  local bx, failed = {}, {}
  local groups, keys = {}, {}
  for _, p0 in ipairs(points) do
    local p = stats_of(p0)
    local ok = p.params[x] ~= nil  -- a point without x (records of several sweeps) is not on this plot
    for k, v in pairs(where) do if p.params[k] ~= v then ok = false end end
    if ok and p.error then failed[#failed + 1] = p.params[x] end
    if ok and not p.skipped and not p.error and p.mean ~= nil then
      local g = opts.series and p.params[opts.series] or 'all'
      if not groups[g] then groups[g] = {} keys[#keys + 1] = g bx[g] = { boxes = {}, values = {} } end
      groups[g][#groups[g] + 1] = { p.params[x], p.mean / scale, p.ci95 and p.ci95 / scale }
      if boxes and p.values and #p.values > 0 then
        local b = bx[g]
        b.boxes[#b.boxes + 1] = box_of(p.params[x], p.values, scale)
        for _, v in ipairs(p.values) do b.values[#b.values + 1] = { p.params[x], v / scale } end
      end
    end
  end
  table.sort(keys, function(a, b)
    local ta = type(a)
    if ta == type(b) and (ta == 'number' or ta == 'string') then return a < b end
    return tostring(a) < tostring(b)
  end)
  local series = {}
  for i, g in ipairs(keys) do
    table.sort(groups[g], function(a, b) return a[1] < b[1] end)
    local t
    if opts.series_title then t = opts.series_title(g)
    elseif opts.series then t = opts.series .. ' = ' .. tostring(g)
    else t = summary.name or 'measured' end
    series[i] = { title = t, points = groups[g] }
    if boxes then
      table.sort(bx[g].boxes, function(a, b) return a[1] < b[1] end)
      series[i].boxes, series[i].values = bx[g].boxes, bx[g].values
      series[i].title = tostring(t) .. ' (line: mean)'
    end
  end
  for _, e in ipairs(opts.extra_series or {}) do series[#series + 1] = e end
  local xs = { table.unpack(failed) }
  for _, s in ipairs(series) do
    for _, pt in ipairs(s.points or {}) do if type(pt[1]) == 'number' then xs[#xs + 1] = pt[1] end end
  end
  local files, err, code = M.lines { out = opts.out,
    title = titled(opts.title or summary.name, summary, points, opts.subtitle), series = series,
    xlabel = opts.xlabel or M.param_label(x), ylabel = opts.ylabel or 'throughput (Mbit/s)',
    logx = opts.logx, logy = opts.logy, hlines = opts.hlines, formats = opts.formats,
    size = opts.size, xtic_label = opts.xtic_label or M.param_tic_label(x, xs), failed = failed }
  return files, err, code
end

--- Throughput against one parameter, one series per value of another.
-- @tparam table summary from plan.sweep (or records from plan.load)
-- @tparam table opts `{out =, x = "delay_ms", series = "window_bytes"|nil,
--   series_title = function(v) -> string, title =, xlabel =, ylabel =,
--   scale = 1e6, logx = true, logy = false, where = {name = value},
--   hlines = ..., formats = ..., size = ..., xtic_label = function(x) -> string
--   (tics at the measured x values; default `param_tic_label(x, values)`:
--   window sizes in KiB, integers as such), xlabel default `param_label(x)`,
--   extra_series = {{title =, points = {{x, y}, ...}[, reference = true]}, ...}
--   (e.g. published values; reference: a bound, drawn dashed),
--   boxes = bool (default: true when a point has more than one value:
--   a box plot over the repetitions at each point, beside the mean line),
--   subtitle = string | false (default: measured_where(summary))}`; x is a
--   parameter of the sweep with numbers for values, series and where's
--   names are parameters of the sweep; scale (the divisor of each value) a
--   finite number > 0
-- @treturn table files or nil, message, CODE as in `lines`
-- @raise on a summary that is not one, or bad options (an unknown key, a
--   wrong type, a scale that is not a finite number > 0, an x, series or
--   where naming no parameter of the sweep:
--   `"qoslab.plot.sweep_lines: opts.x: expected a numeric parameter of the
--   sweep (delay_ms, loss_pct), got string "nope""`), at the caller's line
-- @usage plot.sweep_lines(s, {out = dir .. '/delay', x = 'delay_ms',
--   title = 'TCP throughput vs delay', xlabel = 'one-way delay (ms)'})
function M.sweep_lines(summary, opts)
  local files, err, code = sweep_lines('qoslab.plot.sweep_lines', summary, opts, 1)
  return files, err, code
end

--- Box plots over the repetitions of a sweep: `sweep_lines` with `boxes =
-- true` (the mean line, a box per point from its first to its third
-- quartile with the median across, whiskers to the smallest and largest
-- run, and every run as a circle).
-- @tparam table summary from plan.sweep (or records from plan.load)
-- @tparam table opts as `sweep_lines` (without `boxes`)
-- @treturn table files or nil, message, CODE as in `lines`
-- @raise as `sweep_lines`, and on `opts.boxes`
-- @usage plot.sweep_box(s, {out = dir .. '/delay-box', x = 'delay_ms'})
function M.sweep_box(summary, opts)
  local ctx = 'qoslab.plot.sweep_box'
  check.table(ctx, 'opts', opts)
  if opts.boxes ~= nil then check.fail(ctx, 'opts.boxes', 'nil (always true here)', opts.boxes) end
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.boxes = true
  local files, err, code = sweep_lines(ctx, summary, o, 1)
  return files, err, code
end

--- The smallest grid a 3-D surface is drawn for by `sweep_matrix`: 3 values
-- on each axis (a 2 × 3 surface is two lines seen in perspective, harder
-- to read than the heat map beside it).
-- @table surface_min
M.surface_min = { x = 3, y = 3 }

local SWEEP_MATRIX_KEYS = { out = true, x = true, y = true, title = true, xlabel = true,
  ylabel = true, scale = true, unit = true, contours_bps = true, formats = true, surface = true,
  subtitle = true }

--- Heat map and 3-D surface of a two-parameter sweep, with contour lines.
-- @tparam table summary from plan.sweep (or records from plan.load)
-- @tparam table opts `{out = BASE (writes BASE-heatmap.* and BASE-surface.*),
--   x = "delay_ms", y = "loss_pct", title =, xlabel =, ylabel =,
--   scale = 1e6, unit = "Mbit/s", contours_bps = {500e3, 1e6}, formats =,
--   surface = bool (default: when the grid has surface_min values on each
--   axis, else the heat map alone), subtitle = string | false (default:
--   measured_where(summary))}`; x and y are two parameters of the sweep
--   with numbers for values, x with 2 values or more; scale (the divisor of
--   each value) a finite number > 0
-- @treturn table `{heatmap = files, surface = files | nil}`
-- @return or nil, message, CODE (first failure; data files are written
--   anyway): as `lines`; "EINVAL" when the summary has no points
-- @raise on a summary that is not one, or bad options (an unknown key, a
--   wrong type, a scale that is not a finite number > 0, an x or y naming
--   no numeric parameter of the sweep, y the same as x), naming the field,
--   at the caller's line
-- @usage plot.sweep_matrix(s, {out = dir .. '/matrix', x = 'delay_ms', y = 'loss_pct'})
function M.sweep_matrix(summary, opts)
  local ctx = 'qoslab.plot.sweep_matrix'
  local points = report._points_of(ctx, 'summary', summary, 1)
  check.table(ctx, 'opts', opts)
  check.keys(ctx, 'opts', opts, SWEEP_MATRIX_KEYS, 2)
  base_of(ctx, opts)
  check.boolean(ctx, 'opts.surface', opts.surface)
  check_subtitle(ctx, opts.subtitle, 1)
  local xn = report._check_param(ctx, 'opts.x', points, check.string(ctx, 'opts.x', opts.x, 'delay_ms'), true, 1)
  local yn = report._check_param(ctx, 'opts.y', points, check.string(ctx, 'opts.y', opts.y, 'loss_pct'), true, 1)
  if xn == yn then check.fail(ctx, 'opts.y', 'a parameter other than opts.x', yn) end
  local scale = check.positive(ctx, 'opts.scale', opts.scale, 1e6)
  local unit = check.string(ctx, 'opts.unit', opts.unit, 'Mbit/s')
  for _, k in ipairs { 'title', 'xlabel', 'ylabel' } do check.string(ctx, 'opts.' .. k, opts[k]) end
  local contours = opts.contours_bps or { 500e3, 1e6 }
  check.table(ctx, 'opts.contours_bps', contours)
  for i, c in ipairs(contours) do check.number(ctx, 'opts.contours_bps[' .. i .. ']', c) end
  check_formats(ctx, opts.formats)
  if #points == 0 then return nil, ctx .. ': nothing to plot (the sweep has no points)', 'EINVAL' end
  local xs, ys = sorted_distinct(points, xn), sorted_distinct(points, yn)
  if #xs < 2 then
    check.fail(ctx, 'opts.x', 'a parameter with 2 values or more (the heat map\'s columns)', xn)
  end
  local xi, yi = {}, {}
  for i, v in ipairs(xs) do xi[v] = i end
  for j, v in ipairs(ys) do yi[v] = j end
  local z = {}
  for j = 1, #ys do z[j] = {} end
  for _, p0 in ipairs(points) do
    local p = stats_of(p0)
    local j, i = yi[p.params[yn]], xi[p.params[xn]]
    -- a point without x or y (records of several sweeps) is not on this grid
    if p.mean ~= nil and not p.skipped and i and j then z[j][i] = p.mean / scale end
  end
  local levels = {}
  for i, c in ipairs(contours) do levels[i] = c / scale end
  local title = titled(opts.title or summary.name or 'throughput', summary, points, opts.subtitle)
  local common = { xs = xs, ys = ys, z = z, contours = levels, contour_unit = unit,
    xlabel = opts.xlabel or xn, ylabel = opts.ylabel or yn,
    zlabel = 'throughput (' .. unit .. ')', formats = opts.formats }
  local h = {}
  for k, v in pairs(common) do h[k] = v end
  h.out, h.title = opts.out .. '-heatmap', title
  local s = {}
  for k, v in pairs(common) do s[k] = v end
  s.out, s.title = opts.out .. '-surface', title
  local draw_surface = opts.surface
  if draw_surface == nil then draw_surface = #xs >= M.surface_min.x and #ys >= M.surface_min.y end
  local hf, herr, hcode = M.heatmap(h)
  local sf, serr, scode
  if draw_surface then sf, serr, scode = M.surface(s) end
  if not hf then return nil, herr, hcode end
  if draw_surface and not sf then return nil, serr, scode end
  return { heatmap = hf, surface = sf }
end

return M
